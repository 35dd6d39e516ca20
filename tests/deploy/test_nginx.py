"""deploy/nginx.conf in front of two replicas of the app, driven by two browsers (Chromium).

Two `streamlit run server.py` replicas (what `attention-explorer serve` starts) behind Debian's
nginx, run unprivileged with a configuration made from the shipped file (nginx_support.py).
Which replica served a request is read from nginx's access log in the shipped format
(`upstream=$upstream_addr session=<the sticky cookie>`). The browser test's name says "browser"
so that the suite's `-k "not browser"` leaves it to browser runs, as it does tests/browser/.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from models.limits import STREAMLIT_UPLOAD_MIB
from tests.browser_support import served_app, set_sidebar_text, visit, wait_idle
from tests.deploy.nginx_support import SHIPPED, config_from_shipped, served_nginx

MOST_PROBES = 24  # fresh browsers tried until two land on different replicas: 2**-23 to fail
RERUNS = ("The zebra crossed the river at dawn.", "A quiet violin played in the hall.")
RELOADS = 2
STREAM = "/_stcore/stream"
LOG_WAIT_S = 15
PROBLEMS = ("Something went wrong", "Connection error", "Traceback")


@pytest.fixture(scope="module")
def proxy():
    with contextlib.ExitStack() as stack:
        replicas = [stack.enter_context(served_app()) for _ in range(2)]
        addresses = [url.removeprefix("http://") for url in replicas]
        yield stack.enter_context(served_nginx(addresses)), addresses


def _probe(proxy_url: str, context, name: str, log) -> str:
    """One request from a fresh browser context (it gets nginx's cookie); the replica it hit."""
    response = context.request.get(f"{proxy_url}/_stcore/health?probe={name}")
    assert response.ok
    assert any(cookie["name"] == "ae_replica" for cookie in context.cookies())
    deadline = time.monotonic() + LOG_WAIT_S
    while time.monotonic() < deadline:
        hits = [line for line in log() if f"probe={name}" in line.request]
        if hits:
            return hits[0].upstream
        time.sleep(0.1)
    raise AssertionError(f"nginx logged no line for probe {name}")


def _assert_app_drawn(page) -> None:
    page.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
    body = page.locator("body").inner_text()
    assert not [problem for problem in PROBLEMS if problem in body], body[:2000]
    assert page.locator('[data-testid="stException"]').count() == 0


def _sessions(lines) -> dict[str, set[str]]:
    by_session: dict[str, set[str]] = {}
    for line in lines:
        by_session.setdefault(line.session, set()).add(line.upstream)
    return by_session


def test_the_test_config_is_the_shipped_one_with_only_addresses_replaced():
    shipped = SHIPPED.read_text(encoding="utf-8")
    made = config_from_shipped(shipped, ["127.0.0.1:1", "127.0.0.1:2"], 3, SHIPPED.parent)
    for kept in ("hash $uid_got$uid_set consistent;", "proxy_set_header Upgrade $http_upgrade;",
                 "proxy_set_header Connection $attention_explorer_connection;", "userid on;",
                 "location /_stcore/stream", "log_format attention_explorer"):
        assert kept in shipped and kept in made
    assert "server 127.0.0.1:1;" in made and "server 127.0.0.1:8501;" not in made
    assert "listen 127.0.0.1:3;" in made and "listen 80;" not in made
    size = next(line for line in shipped.splitlines() if "client_max_body_size" in line)
    assert int(size.split()[-1].rstrip("m;")) > STREAMLIT_UPLOAD_MIB   # uploads fit


def test_browser_two_sessions_through_nginx_stay_on_their_replicas(proxy, browser):
    nginx, replicas = proxy
    contexts = []
    try:
        chosen = {}
        for index in range(MOST_PROBES):
            context = browser.new_context()
            contexts.append(context)
            replica = _probe(nginx.url, context, f"c{index}", lambda: nginx.log)
            assert replica in replicas
            chosen.setdefault(replica, context)
            if len(chosen) == 2:
                break
        assert len(chosen) == 2, "every fresh browser landed on one replica"

        sockets: dict[str, list] = {replica: [] for replica in chosen}
        for replica, context in chosen.items():
            page = context.new_page()
            page.on("websocket", lambda socket, kept=sockets[replica]: kept.append(socket))
            visit(page, nginx.url, "", "Attention maps")
            _assert_app_drawn(page)
            for text in RERUNS:   # reruns over the session's WebSocket
                set_sidebar_text(page, text)
                wait_idle(page)
                _assert_app_drawn(page)
                word = text.split()[1].lower()
                page.locator(".js-plotly-plot", has_text=word).first.wait_for(timeout=60_000)
            for _ in range(RELOADS):   # new WebSockets: the browser reconnecting
                page.reload()
                page.get_by_role("heading", name="Attention maps").first.wait_for(timeout=90_000)
                wait_idle(page)
                _assert_app_drawn(page)
            streams = [socket for socket in sockets[replica] if socket.url.endswith(STREAM)]
            assert len(streams) == 1 + RELOADS
            assert all(socket.url.startswith(nginx.url.replace("http", "ws")) for socket in streams)
    finally:
        for context in contexts:
            context.close()

    # the WebSockets are logged when they close: 101 (switched protocols) through nginx
    deadline = time.monotonic() + LOG_WAIT_S
    while time.monotonic() < deadline:
        upgraded = [line for line in nginx.log if STREAM in line.request and line.status == 101]
        if len(upgraded) >= 2 * (1 + RELOADS):
            break
        time.sleep(0.2)
    assert len(upgraded) == 2 * (1 + RELOADS), [line.request for line in nginx.log]
    sessions = _sessions(nginx.log)
    assert all(len(upstreams) == 1 for upstreams in sessions.values()), sessions
    upgraded_sessions = _sessions(upgraded)
    assert len(upgraded_sessions) == 2
    assert {next(iter(upstreams)) for upstreams in upgraded_sessions.values()} == set(replicas)
    for replica in chosen:   # every request of each browser on its replica, WebSockets included
        served = {session for session, upstreams in upgraded_sessions.items()
                  if upstreams == {replica}}
        assert len(served) == 1
        assert sum(1 for line in upgraded if line.session in served) == 1 + RELOADS
