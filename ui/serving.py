"""What server.py adds around app.py on Streamlit's ASGI server (`st.App`): the first figure of a
fresh browser sooner, and the default model loaded before the first browser asks for it.

- `PlotlyFirst` (middleware): Streamlit's browser code fetches its Plotly chunk (about 4.7 MB)
  only when a page's first figure arrives, after the sidebar's widgets, and then evaluates it
  while it draws everything else. The page Streamlit serves gets one module script that imports
  that chunk at once, so the browser fetches and evaluates Plotly while the server runs the page
  (the same module: Streamlit's own import later finds it loaded). Measured with
  bench/bench_cached_view.py: a cached Attention maps view 2.70 s against 3.35 s without it.
- `warm_up` (lifespan): a thread imports the engine and loads the embedded default model as the
  server starts, while the lecturer's browser loads Streamlit, instead of during the first page.

Nothing here changes what a page shows; `streamlit run app.py` still serves the same app without
them. Where Streamlit no longer ships a `PlotlyChart.*.js` chunk, pages are served unchanged.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path

import streamlit

from ui.shutdown import run_cleanups

LOG = logging.getLogger("attention_explorer")
STATIC_JS = Path(streamlit.__file__).parent / "static" / "static" / "js"
# Streamlit's own requests (its assets, websocket, health, uploads, media): never a page
NOT_PAGES = ("/static/", "/_stcore/", "/media/", "/component/", "/app/static/")


@cache
def plotly_chunk() -> str | None:
    """The file name of Streamlit's Plotly chunk (`PlotlyChart.<hash>.js`), None if it has none."""
    found = sorted(path.name for path in STATIC_JS.glob("PlotlyChart.*.js"))
    return found[0] if len(found) == 1 else None


def plotly_import(chunk: str) -> bytes:
    """The module script that imports the chunk, by the path Streamlit's own index script has."""
    return f'<script type="module">import "./static/js/{chunk}";</script>'.encode()


def with_plotly_import(page: bytes, chunk: str | None) -> bytes:
    """Streamlit's page with the chunk's import before `</head>` (unchanged without either)."""
    if chunk is None or b"</head>" not in page or chunk.encode() in page:
        return page
    return page.replace(b"</head>", plotly_import(chunk) + b"</head>", 1)


class PlotlyFirst:
    """ASGI middleware: the HTML page of every GET that is not one of Streamlit's own requests
    imports the Plotly chunk from its head (see the module doc). The request is asked for
    uncompressed (the page is 2 kB) so that its body can be read and its length set again."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if (scope["type"] != "http" or scope.get("method") != "GET" or plotly_chunk() is None
                or any(part in scope.get("path", "") for part in NOT_PAGES)):
            await self.app(scope, receive, send)
            return
        headers = [(name, value) for name, value in scope.get("headers", [])
                   if name.lower() != b"accept-encoding"]
        started: dict = {}

        async def page_with_import(message):
            if message["type"] == "http.response.start":
                started.update(message)  # held until the body says whether it changes
                return
            if message["type"] == "http.response.body" and started:
                start = dict(started)
                started.clear()
                kind = dict((name.lower(), value) for name, value in start.get("headers", []))
                if (kind.get(b"content-type", b"").startswith(b"text/html")
                        and not message.get("more_body")):
                    body = with_plotly_import(message.get("body", b""), plotly_chunk())
                    start["headers"] = [(name, value) for name, value in start["headers"]
                                        if name.lower() != b"content-length"]
                    start["headers"].append((b"content-length", str(len(body)).encode()))
                    message = dict(message, body=body)
                await send(start)
            await send(message)

        await self.app(dict(scope, headers=headers), receive, page_with_import)


ENGINE_IMPORT = threading.Lock()


def import_engine() -> None:
    """Import the engine and what the first page needs (ui.attention: torch, transformers' model
    code), one thread at a time. On a fresh server the warm-up's thread and the first sessions'
    runs of app.py start together, and importing transformers from two threads at once fails
    now and then (each sees the other's half-initialised modules: "cannot import name
    'AttentionInterface' from 'transformers'"); the others wait here, then find it imported.
    The first also reads every page's link controls (ui/link_controls.py) while the others wait,
    before any of them runs a page: no session then parses a page file while Streamlit compiles
    one for another (two syntax trees built at once can fail in CPython 3.11)."""
    with ENGINE_IMPORT:
        import ui.attention  # noqa: F401
        _read_every_page_once()


@cache
def _read_every_page_once() -> int:
    from ui.link_controls import read_every_page

    return read_every_page()


def load_default_model() -> None:
    """Import what the first page needs and load the embedded default model into the server's
    model store (the one the pages read), logging how long it took; a failure is logged and
    left to the page, which says it in one sentence."""
    started = time.perf_counter()
    try:
        import models.limits  # noqa: F401  (the budgets, read from the configuration)
        from models.loading.hub import stay_offline_unless_allowed
        from models.settings import ConfigError, check
        from models.threads import configure_server_threads

        configure_server_threads()  # before torch loads, as app.py does
        try:
            check()
        except ConfigError:
            return  # app.py says what is wrong on every page
        stay_offline_unless_allowed()  # before huggingface_hub reads it at its import
        import_engine()
        from transformers.utils import logging as transformers_logging

        # the server's log says what was loaded in one line; transformers' own bars (one per
        # model a page loads) only fill the lecturer's terminal
        transformers_logging.disable_progress_bar()
        from models.loading.source import ModelSource
        from ui import cache as kept_models

        source = ModelSource.default()
        kept_models.loaded(source)
    except Exception:
        LOG.exception("the default model could not be loaded as the server started; the first "
                      "page will try again")
        return
    print(f"attention-explorer: the default model {source.name} is loaded "
          f"({time.perf_counter() - started:.1f} s after the server started)", file=sys.stderr,
          flush=True)


def open_browser() -> None:
    """Open the app in the machine's browser unless Streamlit runs headless, at the address
    `streamlit run app.py` opens (its browser.serverAddress, else its server.address, else
    localhost): Streamlit's ASGI server does not open one itself (Streamlit 1.67)."""
    from streamlit import cli_util, config
    from streamlit.web.server import server_util

    if config.get_option("server.headless"):
        return
    address = "localhost"
    if config.is_manually_set("browser.serverAddress"):
        address = config.get_option("browser.serverAddress")
    elif config.is_manually_set("server.address"):
        address = server_util.get_display_address(config.get_option("server.address"))
    cli_util.open_browser(server_util.get_url(address))


@asynccontextmanager
async def warm_up(_app):
    """Lifespan: `load_default_model` in a thread of its own while the server serves and the
    browser opened (`open_browser`); when it stops, the files it wrote are removed
    (ui/shutdown.py: uvicorn then ends the process by the signal that stopped it, and `atexit`
    would not run)."""
    threading.Thread(target=load_default_model, name="warm-up", daemon=True).start()
    try:
        open_browser()
    except Exception:
        LOG.exception("the browser could not be opened; open the Local URL above")
    try:
        yield
    finally:
        run_cleanups()
