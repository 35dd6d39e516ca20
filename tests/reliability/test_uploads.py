"""Issue 22, row 1: Streamlit's own upload and message limits are the app's, so a file far beyond
the app's limit is refused by Streamlit while it streams in, before it is held, and every uploader
states its limit.

The served test opens 20 sessions on a real server (as 20 tabs do) and uploads a 190 MB CSV from
each, with its length declared and without (chunked), and measures the server's resident memory:
flat. The same uploads to a server started with Streamlit's default limit (200 MB) show that the
measurement sees what a server holds: there, memory grows by the files.
"""

from __future__ import annotations

import ast
import asyncio
import tomllib
from pathlib import Path

from streamlit.testing.v1 import AppTest

from models import limits
from models.limits import (CORPUS_UPLOAD_BYTES, FINE_TUNING_UPLOAD_MIB, KIB, MIB,
                           STREAMLIT_UPLOAD_MIB, UPLOAD_BYTES)
from tests.app_support import APP, TIMEOUT_S, assert_no_failure, texts
from tests.reliability.served import PeakMemory, open_session, streamlit_server, upload
from ui.server_limits import OPTIONS

ROOT = Path(__file__).resolve().parents[2]
TABS = 20
LARGE = 190 * MIB
HELD_GROWTH = 48 * MIB  # what the refused uploads may add to the server (refused: about nothing)
# Each uploader's limit in MiB, by its name in models/limits.py.
UPLOADER_LIMITS = {name: getattr(limits, name) for name in dir(limits) if name.endswith("_UPLOAD_MIB")
                   and name != "STREAMLIT_UPLOAD_MIB"}
CONTROL_TABS, CONTROL_FILE = 3, 48 * MIB  # accepted by Streamlit's default limit, and held


def test_streamlits_limits_in_the_config_file_are_the_apps():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    for option, value in OPTIONS.items():
        assert config[option.removeprefix("server.")] == value, option
    largest = max(UPLOAD_BYTES, CORPUS_UPLOAD_BYTES)
    assert OPTIONS["server.maxUploadSize"] * MIB >= largest > (STREAMLIT_UPLOAD_MIB - 1) * MIB


def test_every_uploader_passes_the_apps_limit_to_the_browser():
    uploaders = 0
    for path in sorted((ROOT / "pages").glob("*.py")) + sorted((ROOT / "ui").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "file_uploader":
                uploaders += 1
                limit = next((k.value for k in node.keywords if k.arg == "max_upload_size"), None)
                assert isinstance(limit, ast.Name) and limit.id in UPLOADER_LIMITS, \
                    f"{path.name}:{node.lineno}"
                assert UPLOADER_LIMITS[limit.id] <= STREAMLIT_UPLOAD_MIB
    assert uploaders >= 2


def test_the_fine_tuning_uploader_states_its_limit():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["fine_tuning_data"] = "uploaded"
    at.switch_page("pages/fine_tuning.py").run()
    assert_no_failure(at)
    uploader = at.get("file_uploader")[0]
    assert uploader.proto.max_upload_size_mb == FINE_TUNING_UPLOAD_MIB
    assert f"At most 1000 rows and {UPLOAD_BYTES // KIB} KB" in texts(at)


async def _sessions(server, count: int):
    return [await open_session(server) for _ in range(count)]


def test_twenty_tabs_uploading_190_mb_leave_the_servers_memory_flat():
    with streamlit_server() as server:
        loop = asyncio.new_event_loop()
        try:
            sessions = loop.run_until_complete(_sessions(server, TABS))
            before = server.rss()
            with PeakMemory(server) as memory:
                answers = [upload(server, session, LARGE, chunked)
                           for session in sessions for chunked in (False, True)]
            after = server.rss()
            small = upload(server, sessions[0], 100 * KIB, chunked=False)
            for session in sessions:
                loop.run_until_complete(session.socket.close())
        finally:
            loop.close()
    print(f"\n{TABS} tabs x 2 uploads of 190 MB: server RSS {before / MIB:.0f} MB before, "
          f"peak {memory.peak / MIB:.0f} MB, {after / MIB:.0f} MB after")
    assert set(answers) == {413}  # "File too large", from Streamlit, every time
    assert small == 204  # a file within the limit is taken
    assert memory.peak - before < HELD_GROWTH and after - before < HELD_GROWTH


def test_the_measurement_sees_uploads_a_server_holds():
    """The control: with Streamlit's default limit (200 MB), uploads are held per session."""
    with streamlit_server("--server.maxUploadSize", "200") as server:
        loop = asyncio.new_event_loop()
        try:
            sessions = loop.run_until_complete(_sessions(server, CONTROL_TABS))
            before = server.rss()
            answers = [upload(server, session, CONTROL_FILE, chunked=False)
                       for session in sessions]
            after = server.rss()
            for session in sessions:
                loop.run_until_complete(session.socket.close())
        finally:
            loop.close()
    print(f"\ncontrol, {CONTROL_TABS} uploads of 48 MB under a 200 MB limit: server RSS "
          f"{before / MIB:.0f} MB before, {after / MIB:.0f} MB after")
    assert answers == [204] * CONTROL_TABS
    assert after - before > CONTROL_TABS * CONTROL_FILE * 0.8
