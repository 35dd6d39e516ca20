"""Debian's nginx as an unprivileged process, configured from the shipped deploy/nginx.conf.

`config_from_shipped` keeps every block of the shipped file (the upstream and its sticky hash, the
WebSocket map, the log format, the server's proxy settings) and replaces only what is the
machine's: the upstream's server lines (the test's replicas), the listen line (a free loopback
port) and the access log's path.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "nginx.conf"
UPSTREAM = "attention_explorer"
START_TIMEOUT_S = 20
UNPRIVILEGED_USER = "nobody"  # nginx runs as this when the tests run as root

_UPSTREAM_BLOCK = re.compile(r"(upstream\s+" + UPSTREAM + r"\s*\{)(?P<body>[^}]*)(\})")
_SERVER_LINE = re.compile(r"^[ \t]*server\s+[^;]+;[ \t]*\n", re.MULTILINE)
_LISTEN_LINE = re.compile(r"^([ \t]*)listen\s+[^;]+;", re.MULTILINE)
_ACCESS_LOG = re.compile(r"^([ \t]*)access_log\s+\S+\s+(\w+);", re.MULTILINE)


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx", "/usr/bin/nginx") if Path(path).exists()), None)
    if found is None:
        raise RuntimeError("nginx is missing: install Debian's nginx-light package "
                           "(./test.sh does) to run the deployment test.")
    return found


def config_from_shipped(shipped: str, replicas: list[str], port: int, folder: Path) -> str:
    """A whole nginx.conf for an unprivileged run in `folder`, whose `http` block is `shipped`
    with its upstream pointing at `replicas` ("127.0.0.1:PORT"), listening on `port`."""
    upstream = _UPSTREAM_BLOCK.search(shipped)
    if upstream is None or len(_SERVER_LINE.findall(upstream["body"])) < 2:
        raise ValueError(f"{SHIPPED} has no upstream {UPSTREAM} with at least two servers")
    indent = re.search(r"^([ \t]*)server\s", upstream["body"], re.MULTILINE)[1]
    first = _SERVER_LINE.search(upstream["body"])
    kept = _SERVER_LINE.sub("", upstream["body"])
    servers = "".join(f"{indent}server {address};\n" for address in replicas)
    body = kept[:first.start()] + servers + kept[first.start():]
    http = shipped[:upstream.start("body")] + body + shipped[upstream.end("body"):]
    http, listens = _LISTEN_LINE.subn(rf"\1listen 127.0.0.1:{port};", http)
    http, logs = _ACCESS_LOG.subn(rf"\1access_log {folder / 'access.log'} \2;", http)
    if listens != 1 or logs != 1:
        raise ValueError(f"{SHIPPED} must hold one listen line and one access_log line")
    temp = {name: folder / name for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    return "\n".join([
        "daemon off;",
        "worker_processes 1;",
        f"pid {folder / 'nginx.pid'};",
        f"error_log {folder / 'error.log'} notice;",
        "events { worker_connections 256; }",
        "http {",
        *(f"    {name}_temp_path {path};" for name, path in temp.items()),
        http,
        "}",
        "",
    ])


@dataclass(frozen=True)
class LogLine:
    request: str
    status: int
    upstream: str
    session: str


_LOG_LINE = re.compile(r'"(?P<request>[^"]*)" (?P<status>\d+) upstream=(?P<upstream>\S*) '
                       r"session=(?P<session>\S*)")


def read_log(path: Path) -> list[LogLine]:
    if not path.exists():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        match = _LOG_LINE.search(text)
        if match is None:
            raise AssertionError(f"an access log line not in the shipped format: {text}")
        # nginx logs an empty variable as "-": the cookie being set is "-ae_replica=…", the
        # one sent back "ae_replica=…-"; both name the same browser
        lines.append(LogLine(match["request"], int(match["status"]), match["upstream"],
                             match["session"].strip("-")))
    return lines


@dataclass(frozen=True)
class Proxy:
    url: str
    folder: Path

    @property
    def log(self) -> list[LogLine]:
        return read_log(self.folder / "access.log")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def served_nginx(replicas: list[str]):
    """nginx in the foreground on a free loopback port in front of `replicas`; yields a Proxy.
    When the tests run as root, nginx runs as `nobody` (it never needs root here)."""
    binary = nginx_binary()
    folder = Path(tempfile.mkdtemp(prefix="attention-explorer-nginx-"))
    port = _free_port()
    (folder / "nginx.conf").write_text(
        config_from_shipped(SHIPPED.read_text(encoding="utf-8"), replicas, port, folder), encoding="utf-8")
    as_user = {}
    if os.geteuid() == 0:
        account = pwd.getpwnam(UNPRIVILEGED_USER)
        os.chown(folder, account.pw_uid, account.pw_gid)
        as_user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    command = [binary, "-p", str(folder), "-c", str(folder / "nginx.conf"),
               "-e", str(folder / "error.log")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, **as_user)
    if checked.returncode != 0:
        raise RuntimeError(f"nginx refused the configuration:\n{checked.stderr}")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               **as_user)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited: {process.stderr.read().decode()}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not answer within {START_TIMEOUT_S} s")
                time.sleep(0.2)
        yield Proxy(url, folder)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(folder, ignore_errors=True)
