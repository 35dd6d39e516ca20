"""The exceptions a served app logs reach the tests that drive it (tests/conftest.py,
`served_app_logs_no_exception`; tests/browser_support.py `served_app`): app.py's guard shows the
user a sentence and logs the trace, and a browser test that has moved on would not see either."""

from __future__ import annotations

from tests.browser_support import app_log, logged_failures

EARLIER = """Loading weights: 100%|##########| 103/103
page Head statistics failed
Traceback (most recent call last):
  File "/app/app.py", line 90, in <module>
ValueError: an earlier failure
"""
LATER = """  You can now view your Streamlit app in your browser.
page Attention maps failed
Traceback (most recent call last):
  File "/app/app.py", line 90, in <module>
    page.run()
  File "/lib/python3.11/copy.py", line 230, in _deepcopy_dict
    for key, value in x.items():
RuntimeError: dictionary changed size during iteration
2026-11-29 05:10:27.001 a line after it
"""


def test_each_logged_exception_is_named_by_its_entry_and_its_error(tmp_path):
    log = tmp_path / "streamlit-8501.log"
    log.write_text(EARLIER + LATER)
    assert logged_failures(log) == [
        "page Head statistics failed -> ValueError: an earlier failure",
        "page Attention maps failed -> RuntimeError: dictionary changed size during iteration"]
    # from where a test started reading: only what was logged during it
    assert logged_failures(log, len(EARLIER.encode())) == [
        "page Attention maps failed -> RuntimeError: dictionary changed size during iteration"]
    log.write_text("  You can now view your Streamlit app in your browser.\nstopped\n")
    assert logged_failures(log) == []


def test_a_served_apps_log_is_named_by_its_port():
    assert app_log("http://127.0.0.1:39093").name == "streamlit-39093.log"
