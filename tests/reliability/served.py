"""The real app served by `streamlit run`, driven over HTTP and its websocket the way a browser
does (no browser needed): open sessions, upload files to Streamlit's upload endpoint, and read the
server's resident memory by its process id."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
START_TIMEOUT_S = 90
RUN_TIMEOUT_S = 180  # a session's first run loads the embedded model
XSRF_COOKIE = "_streamlit_xsrf"
SEND_BYTES = 2**20  # a client sends its upload this much at a time


@dataclass(frozen=True)
class Server:
    port: int
    process: psutil.Process

    def rss(self) -> int:
        return self.process.memory_info().rss


@contextlib.contextmanager
def streamlit_server(*options: str):
    """`streamlit run app.py` on loopback with the app's .streamlit/config.toml and `options`
    (e.g. "--server.maxUploadSize", "200"); stopped afterwards."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
               "--server.headless", "true", "--server.address", HOST, "--server.port", str(port),
               "--browser.gatherUsageStats", "false", *options]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, f"streamlit exited with code {process.returncode}"
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}/_stcore/health", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "streamlit did not start"
                time.sleep(0.3)
        yield Server(port, psutil.Process(process.pid))
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class Session:
    """A browser tab's session: its websocket, id and XSRF token."""

    socket: object
    session_id: str
    xsrf: str


async def open_session(server: Server) -> Session:
    """Connect as a browser tab does and run the app's default page once (until it finishes)."""
    with urllib.request.urlopen(f"http://{HOST}:{server.port}/_stcore/health") as response:
        cookies = [value for name, value in response.headers.items() if name.lower() == "set-cookie"]
    xsrf = next(cookie.split(";")[0].split("=", 1)[1] for cookie in cookies
                if cookie.startswith(XSRF_COOKIE))
    connection = await websockets.connect(
        f"ws://{HOST}:{server.port}/_stcore/stream", subprotocols=["streamlit", xsrf],
        additional_headers={"Cookie": f"{XSRF_COOKIE}={xsrf}",
                            "Origin": f"http://{HOST}:{server.port}"})
    rerun = BackMsg()
    rerun.rerun_script.query_string = ""
    rerun.rerun_script.page_script_hash = ""
    await connection.send(rerun.SerializeToString())
    session_id = None
    while True:
        message = ForwardMsg()
        message.ParseFromString(await asyncio.wait_for(connection.recv(), RUN_TIMEOUT_S))
        kind = message.WhichOneof("type")
        if kind == "new_session":
            session_id = message.new_session.initialize.session_id
        elif kind == "script_finished" and session_id is not None:
            return Session(connection, session_id, xsrf)


def upload(server: Server, session: Session, size: int, chunked: bool) -> int | str:
    """PUT a CSV of `size` bytes to Streamlit's upload endpoint as the file uploader does (a
    multipart form), declaring its length or not (chunked). Returns the HTTP status, or the
    error's name when the server closed the connection without one."""
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            "filename=\"big.csv\"\r\nContent-Type: text/csv\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    connection = http.client.HTTPConnection(HOST, server.port, timeout=60)
    connection.putrequest("PUT", f"/_stcore/upload_file/{session.session_id}/{uuid.uuid4()}")
    connection.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    connection.putheader("X-Xsrftoken", session.xsrf)
    connection.putheader("Cookie", f"{XSRF_COOKIE}={session.xsrf}")
    if chunked:
        connection.putheader("Transfer-Encoding", "chunked")
    else:
        connection.putheader("Content-Length", str(len(head) + size + len(tail)))
    connection.endheaders()
    rows = b"text,label\n" + b"a fine sentence,1\n" * (SEND_BYTES // 18)

    def send(data: bytes) -> None:
        connection.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)

    try:
        send(head)
        sent = 0
        while sent < size:
            piece = rows[: min(len(rows), size - sent)]
            send(piece)
            sent += len(piece)
        send(tail)
        if chunked:
            connection.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading: its answer says why
    try:
        return connection.getresponse().status
    except (ConnectionError, http.client.HTTPException) as error:
        return type(error).__name__
    finally:
        connection.close()


class PeakMemory:
    """Samples a server's resident memory in a thread while the block runs; `peak` after."""

    def __init__(self, server: Server, every_s: float = 0.05):
        self.server, self.every_s = server, every_s
        self.peak = server.rss()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(self.every_s):
            self.peak = max(self.peak, self.server.rss())

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, self.server.rss())
