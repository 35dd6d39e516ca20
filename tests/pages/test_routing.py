"""Every page runs inside app.py (ui/routing.py), also when sessions start together on a fresh
server: Streamlit's legacy pages/ routing is one flag for the whole server, so a session can be
routed the legacy way (its page file run alone) after another session's page has cleared the
flag. Such a page drew Streamlit's own list of page files and no sidebar (seen in the real
browser with three test workers opening pages at once)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import script_runner
from streamlit.testing.v1 import AppTest

from tests.app_support import APP, TIMEOUT_S, assert_no_failure


@pytest.fixture
def legacy_run_after_another_session_cleared_the_flag(monkeypatch):
    """The race, made certain: this session's run takes the legacy routing, and the flag is
    cleared (as another session's page does) before its page runs."""
    legacy = script_runner._mpa_v1
    taken = []

    def routed(main_script_path):
        taken.append(main_script_path)
        PagesManager.uses_pages_directory = False
        legacy(main_script_path)

    monkeypatch.setattr(script_runner, "_mpa_v1", routed)
    return taken


def test_a_page_routed_the_legacy_way_after_the_flag_was_cleared_reruns_through_app(
        legacy_run_after_another_session_cleared_the_flag):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("pages/attention_cost.py")
    at.run()
    assert legacy_run_after_another_session_cleared_the_flag  # the legacy routing was taken
    assert_no_failure(at)
    assert at.title[0].value == "The n² cost of attention"
    assert [box.label for box in at.sidebar.text_area][:1] == ["Sentence"]  # app.py's sidebar


def test_a_page_file_run_as_the_main_script_is_drawn_not_rerun():
    """Without app.py around it at all (`streamlit run pages/attention_cost.py`, or a test of
    one page file) there is no app.py to rerun through: the page draws itself."""
    at = AppTest.from_file(str(Path(APP).parent / "pages" / "attention_cost.py"),
                           default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception
    assert at.title[0].value == "The n² cost of attention"
