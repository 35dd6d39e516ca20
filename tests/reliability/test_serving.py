"""server.py's additions around app.py (ui/serving.py): a page that imports Streamlit's Plotly
chunk from its head, and the default model loaded as the server starts; and the command that
serves it (ui/launch.py, .streamlit/config.toml): nothing asked of the internet, no question in
the terminal."""

from __future__ import annotations

import ast
import asyncio
import os
import re
import stat
import subprocess
import sys
import time
import urllib.request

from cli import main as cli
from tests.browser_support import ROOT, _free_port, app_log, stop_app, wait_until_it_answers
from ui import serving

PAGE = (b'<html><head><script type="module" src="./static/js/index.X.js"></script></head>'
        b'<body></body></html>')


def test_streamlit_ships_one_plotly_chunk_and_the_page_imports_it_once():
    chunk = serving.plotly_chunk()
    assert chunk is not None and re.fullmatch(r"PlotlyChart\.[\w-]+\.js", chunk), (
        "Streamlit no longer ships one PlotlyChart.*.js: pages would open without the import")
    assert (serving.STATIC_JS / chunk).stat().st_size > 1_000_000  # Plotly itself
    page = serving.with_plotly_import(PAGE, chunk)
    assert page == PAGE.replace(b"</head>", serving.plotly_import(chunk) + b"</head>")
    assert serving.with_plotly_import(page, chunk) == page  # once
    assert serving.with_plotly_import(PAGE, None) == PAGE
    assert serving.with_plotly_import(b"<p>no head</p>", chunk) == b"<p>no head</p>"


def _through_middleware(path: str, content_type: bytes, body: bytes, method: str = "GET"):
    """One request through PlotlyFirst to an app answering `body`: (what the app saw of the
    request's headers, the response's start message, its body)."""
    seen, sent = {}, []

    async def app(scope, receive, send):
        seen.update(dict(scope["headers"]))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(b"accept-encoding", b"gzip"), (b"host", b"x")]}
    asyncio.run(serving.PlotlyFirst(app)(scope, receive, send))
    start, answer = sent
    return seen, start, answer["body"]


def test_the_middleware_adds_the_import_to_pages_only_and_sets_their_length():
    chunk = serving.plotly_chunk()
    seen, start, body = _through_middleware("/all_heads", b"text/html; charset=UTF-8", PAGE)
    assert body == serving.with_plotly_import(PAGE, chunk) and body != PAGE
    assert (b"content-length", str(len(body)).encode()) in start["headers"]
    assert [name for name, _ in start["headers"]].count(b"content-length") == 1
    assert b"accept-encoding" not in seen  # asked uncompressed, so that it can be read
    for path, kind, method in [("/static/js/index.X.js", b"text/javascript", "GET"),
                               ("/_stcore/health", b"text/html", "GET"),
                               ("/", b"application/json", "GET"), ("/", b"text/html", "POST")]:
        seen, start, body = _through_middleware(path, kind, PAGE, method)
        assert body == PAGE and (b"content-length", str(len(PAGE)).encode()) in start["headers"]


def test_the_served_page_imports_the_chunk_and_the_default_model_loads_as_it_starts(app_url):
    chunk = serving.plotly_chunk()
    for path in ("/", "/all_heads?layer=2"):
        with urllib.request.urlopen(f"{app_url}{path}", timeout=30) as response:
            page = response.read()
        assert page.count(serving.plotly_import(chunk)) == 1, path
    with urllib.request.urlopen(f"{app_url}/static/js/{chunk}", timeout=30) as response:
        assert response.status == 200 and b"plotly" in response.read(4_000_000).lower()
    # the warm-up thread's line, once, with no failure logged (the autouse check)
    deadline = time.monotonic() + 240
    while "the default model" not in (text := app_log(app_url).read_text(errors="replace")):
        assert time.monotonic() < deadline, "the default model was not loaded at the start"
        time.sleep(1)
    loaded = re.findall(r"the default model (\S+) is loaded \(([\d.]+) s", text)
    assert len(loaded) == 1 and loaded[0][0] == "sentence-transformers/all-MiniLM-L6-v2", text


def test_the_warm_up_keeps_the_hub_off_and_loads_nothing_with_a_wrong_configuration(tmp_path):
    """In a fresh interpreter, as a server's first thread: HF_HUB_OFFLINE is set before
    huggingface_hub is imported (it reads it once), and a wrong configuration stops the warm-up
    before the engine and transformers load (app.py then says what is wrong)."""
    probe = ("import sys; from ui.serving import load_default_model; load_default_model(); "
             "import huggingface_hub.constants as c; "
             "print(c.HF_HUB_OFFLINE, 'transformers' in sys.modules)")
    clean = {name: value for name, value in os.environ.items()
             if not name.startswith(("HF_HUB_OFFLINE", "ATTENTION_EXPLORER_"))}
    fine = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=clean, text=True,
                          capture_output=True, timeout=300)
    assert fine.stdout.split() == ["True", "True"], fine.stderr[-2000:]
    assert "the default model sentence-transformers/all-MiniLM-L6-v2 is loaded" in fine.stderr
    assert "Loading weights" not in fine.stderr  # transformers' bar, off in a server
    wrong = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, text=True, timeout=300,
                           env=dict(clean, ATTENTION_EXPLORER_HUB="sometimes"),
                           capture_output=True)
    assert wrong.stdout.split()[1:] == ["False"], wrong.stderr[-2000:]
    assert "Traceback" not in wrong.stderr and "is loaded" not in wrong.stderr


def test_cleanups_run_once_last_first_and_a_failing_one_does_not_stop_the_others(caplog,
                                                                                monkeypatch):
    from ui import shutdown

    monkeypatch.setattr(shutdown, "_CLEANUPS", [])  # not this test process's own cleanups
    ran = []

    def fails():
        ran.append("fails")
        raise OSError("gone already")

    shutdown.on_shutdown(ran.append, "first")
    shutdown.on_shutdown(fails)
    shutdown.on_shutdown(ran.append, "last")
    shutdown.run_cleanups()
    shutdown.run_cleanups()  # the server's lifespan, then atexit: nothing twice
    assert ran == ["last", "fails", "first"]
    assert "a cleanup at shutdown failed" in caplog.text and "gone already" in caplog.text


def _serve_until_it_answers(arguments: list[str], env: dict, log) -> int:
    """Start what `attention-explorer serve` (and start.sh) runs with `arguments`, wait until it
    answers, stop it; its port. Its terminal never types anything (stdin stays open, empty)."""
    port = _free_port()
    command = cli.streamlit_command([*arguments, "--server.port", str(port)])
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        wait_until_it_answers(process, f"http://127.0.0.1:{port}", timeout_s=60)
        return port
    finally:
        stop_app(process.pid)
        process.wait(timeout=30)


def test_the_served_app_asks_nothing_of_the_internet_and_nothing_of_the_terminal(tmp_path):
    """Without a display (headless), Streamlit would ask checkip.amazonaws.com for the machine's
    public address before listening; with one, on its first run (no ~/.streamlit yet), it would
    wait for an email address in the terminal. Both servers here answer, print their local and
    network addresses and no public one, and the one with a display opens the browser on its
    local address (a stand-in `xdg-open` notes it)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    opened = tmp_path / "opened.txt"
    opener = tools / "xdg-open"
    opener.write_text(f'#!/bin/sh\necho "$1" >> "{opened}"\n')
    opener.chmod(opener.stat().st_mode | stat.S_IEXEC)
    home = tmp_path / "home"  # a first run: no ~/.streamlit/credentials.toml
    home.mkdir()
    env = dict(os.environ, HOME=str(home), PATH=f"{tools}{os.pathsep}{os.environ['PATH']}",
               HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", DISPLAY=":0")
    for headless in ("true", "false"):
        log_path = tmp_path / f"headless-{headless}.log"
        with open(log_path, "w") as log:
            port = _serve_until_it_answers(["--server.headless", headless], env, log)
        banner = log_path.read_text()
        assert f"Local URL: http://localhost:{port}" in banner, banner
        assert "Network URL" in banner, banner
        for unwanted in ("External URL", "external IP", "Email"):
            assert unwanted not in banner, banner
    deadline = time.monotonic() + 30  # the opener runs beside the server
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert opened.exists(), "the browser was not opened"
    assert opened.read_text().split() == [f"http://localhost:{port}"]


ALONGSIDE = """
import sys, threading, time
from ui import serving

errors = []


def later(work, delay):
    def run():
        time.sleep(delay)
        try:
            work()
        except Exception as error:
            errors.append(repr(error))
    return threading.Thread(target=run)


def session():  # what a session's run of app.py imports first
    IMPORT
    from transformers import AttentionInterface  # the name that went missing
    import ui.state, ui.links, ui.decks


runs = [later(serving.load_default_model, 0)] + [later(session, delay)
                                                 for delay in (0.3, 0.9, 1.5, 2.1, 2.7)]
for run in runs:
    run.start()
for run in runs:
    run.join()
print(errors)
"""


def test_the_warm_up_and_the_first_sessions_import_the_engine_together_without_failing():
    """A fresh server: the warm-up's thread and five sessions' runs of app.py, started 0.3-2.7 s
    apart, all import the engine; importing transformers from two threads at once failed the
    first page now and then ("cannot import name 'AttentionInterface'", once in a clone's
    browser test). app.py goes through the same lock, before any other engine import."""
    probe = ALONGSIDE.replace("IMPORT", "serving.import_engine()")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, text=True,
                            capture_output=True, timeout=300,
                            env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert result.stdout.strip() == "[]", (result.stdout, result.stderr[-2000:])
    statements = ast.parse((ROOT / "app.py").read_text()).body
    call = next(index for index, node in enumerate(statements)
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "import_engine")
    first_ui = next(index for index, node in enumerate(statements)
                    if isinstance(node, ast.ImportFrom) and node.module.startswith("ui.")
                    and node.module != "ui.serving")
    assert call < first_ui


def test_a_page_parse_tried_again_after_pythons_spurious_ast_error(monkeypatch):
    """CPython 3.11 can refuse a syntax tree built while another thread builds one ("AST
    constructor recursion depth mismatch", gh-106905: it failed a page in a clone's browser
    test when two sessions opened at once). The link controls' parse is tried again; an error
    that stays is the caller's."""
    from ui import link_controls

    real = ast.parse
    failures = iter([SystemError("AST constructor recursion depth mismatch (before=54, "
                                 "after=50)")] * (link_controls.PARSE_ATTEMPTS - 1))

    def colliding(source, *args, **kwargs):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real(source, *args, **kwargs)

    source = (ROOT / "pages" / "attention_maps.py").read_text()
    monkeypatch.setattr(link_controls.ast, "parse", colliding)
    controls = link_controls.controls_in_source(source)
    assert controls.prefix == "maps" and controls.kinds["maps_layer"] == "index"

    def always(source, *args, **kwargs):
        raise SystemError("AST constructor recursion depth mismatch")

    monkeypatch.setattr(link_controls.ast, "parse", always)
    try:
        link_controls.syntax_tree(source)
    except SystemError as error:
        assert "recursion depth mismatch" in str(error)
    else:
        raise AssertionError("a parse that always fails must raise")


def test_the_first_engine_import_reads_every_pages_controls_before_any_page_runs():
    """So no session parses a page file while Streamlit compiles one for another session."""
    from ui import link_controls

    serving._read_every_page_once.cache_clear()
    link_controls._controls_of_file.cache_clear()
    serving.import_engine()
    pages = sorted((ROOT / "pages").glob("*.py"))
    assert link_controls._controls_of_file.cache_info().currsize == len(pages) > 20
    before = link_controls._controls_of_file.cache_info().hits
    assert link_controls.page_controls(pages[0]) == link_controls.controls_in_source(
        pages[0].read_text())
    assert link_controls._controls_of_file.cache_info().hits == before + 1  # no parse then
