"""How many simultaneous sessions one replica serves: the figures in docs/deploy.md.

Usage: .venv/bin/python deploy/measure_sessions.py [--levels 1 2 4 8] [--replicas 1]
                                                   [--without-browser]

Serves the app (`streamlit run server.py`, what `attention-explorer serve` starts; one compute
thread per replica, as deploy/attention-explorer@.service sets), with `--replicas 2` or more
behind nginx configured from deploy/nginx.conf, and opens LEVEL fresh browser sessions at once
in headless Chromium for each level. For every session it reads two times in the page itself
(so one session's wait never counts in another's):
  open  from navigation start to the first heatmap painted (the default sentence), and the
        part of it after the page opened its WebSocket (the server's rerun and the drawing,
        without loading and parsing the page's scripts, which a student's laptop does);
  own   from pressing Ctrl+Enter on the session's own sentence to its heatmap showing it
        (nothing cached: every session's sentence is different).
With --without-browser, each session is a WebSocket speaking Streamlit's own protocol from this
process (what the page's script sends: a rerun, then a rerun with its own sentence), and the
times are the server's alone: from connecting to the first heatmap's message, and from sending
the sentence to the heatmap message holding it; nothing is drawn.
Prints each level's median and slowest, the machine's load average before it, and each
replica's memory (RSS) at the end. The browsers run on the same machine as the replicas: in a
class they run on the students' laptops, so these figures are pessimistic.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402
import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from tests.browser_support import launch_chromium, served_app, wait_idle  # noqa: E402
from tests.deploy.nginx_support import served_nginx  # noqa: E402

WORDS = ("house river music garden window table winter summer doctor teacher school market "
         "letter bridge forest island animal camera corner dinner office palace village "
         "battle castle chapter engine flower mirror planet rocket violin harbor meadow").split()
WAIT_MS = 600_000
# In every page: the first moment each first-row label of the heatmap is seen (every 50 ms).
WATCH = """() => {
    window.__seen = {};
    const Native = window.WebSocket;
    window.WebSocket = function (...args) {
        window.__socket = window.__socket || performance.now();
        return new Native(...args);
    };
    window.WebSocket.prototype = Native.prototype;
    Object.assign(window.WebSocket, Native);
    setInterval(() => {
        const plot = document.querySelector('.js-plotly-plot');
        const rows = plot && plot.data && plot.data[0] && plot.data[0].y;
        if (rows && rows.length > 1 && !(rows[1] in window.__seen)) {
            window.__seen[rows[1]] = performance.now();
        }
    }, 50);
}"""
FIRST_SEEN = "() => { const seen = Object.values(window.__seen || {}); " \
             "return seen.length ? Math.min(...seen) : null; }"


def _replica_memory_mib(url: str) -> float | None:
    port = int(url.rsplit(":", 1)[1])
    for connection in psutil.net_connections("tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port \
                and connection.pid:
            return psutil.Process(connection.pid).memory_info().rss / 2**20
    return None


def _pair(times: list[float]) -> str:
    return f"{statistics.median(times):6.2f} / {max(times):6.2f} s"


def measure_level(browser, url: str, count: int, words: list[str],
                  round_number: int) -> tuple[list, list, list]:
    contexts = [browser.new_context(viewport={"width": 1200, "height": 900})
                for _ in range(count)]
    pages = []
    for context in contexts:
        page = context.new_page()
        page.add_init_script(f"({WATCH})()")
        page.goto(f"{url}/", wait_until="commit")
        pages.append(page)
    opened, served = [], []
    for page in pages:
        page.wait_for_function(FIRST_SEEN, timeout=WAIT_MS, polling=100)
        first = page.evaluate(FIRST_SEEN)
        opened.append(first / 1000)
        served.append((first - page.evaluate("() => window.__socket")) / 1000)
    for page in pages:
        wait_idle(page, WAIT_MS)
    pressed = []
    for page, word in zip(pages, words, strict=True):
        box = page.get_by_label("Sentence", exact=True)
        box.fill(_sentence(word, round_number))
        pressed.append(page.evaluate("() => performance.now()"))
        box.press("Control+Enter")
    own = []
    for page, word, start in zip(pages, words, pressed, strict=True):
        label = f"{word} #1"
        page.wait_for_function("label => window.__seen && label in window.__seen", arg=label,
                               timeout=WAIT_MS, polling=100)
        own.append((page.evaluate("label => window.__seen[label]", label) - start) / 1000)
    for context in contexts:
        context.close()
    return opened, served, own


def _sentence(word: str, round_number: int) -> str:
    """A sentence no other session of any round asked for: nothing comes from a cache."""
    return f"{word} flies like an arrow while {round_number} students watch"


async def _until_heatmap(socket, start: float, word: str | None = None) -> tuple[float, str]:
    """Read the run's messages to its end: the seconds from `start` to the first heatmap (the
    first one holding `word`, when given) and the sidebar's sentence widget's id."""
    first, sentence_id = None, ""
    while True:
        message = ForwardMsg()
        message.ParseFromString(await socket.recv())
        kind = message.WhichOneof("type")
        if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            shown = element.WhichOneof("type")
            if shown == "plotly_chart" and first is None and (
                    word is None or word in element.plotly_chart.spec):
                first = time.perf_counter() - start
            if shown == "text_area" and element.text_area.label == "Sentence":
                sentence_id = element.text_area.id
        if kind == "script_finished":
            if first is None:
                raise RuntimeError("a run finished without a heatmap")
            return first, sentence_id


async def _protocol_session(url: str, word: str, round_number: int) -> tuple[float, float]:
    start = time.perf_counter()
    stream = url.replace("http://", "ws://") + "/_stcore/stream"
    async with websockets.connect(stream, subprotocols=["streamlit"], max_size=None) as socket:
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        await socket.send(rerun.SerializeToString())
        opened, sentence_id = await _until_heatmap(socket, start)
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        widget = rerun.rerun_script.widget_states.widgets.add()
        widget.id = sentence_id
        widget.string_value = _sentence(word, round_number)
        start = time.perf_counter()
        await socket.send(rerun.SerializeToString())
        own, _ = await _until_heatmap(socket, start, word)
    return opened, own


def measure_protocol_level(url: str, count: int, words: list[str],
                           round_number: int) -> tuple[list, list]:
    async def together():
        return await asyncio.gather(*(_protocol_session(url, word, round_number)
                                      for word in words[:count]))

    times = asyncio.run(together())
    return [opened for opened, _ in times], [own for _, own in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--without-browser", action="store_true",
                        help="sessions speak Streamlit's protocol from this process")
    args = parser.parse_args()
    if max(args.levels) > len(WORDS):
        parser.error(f"at most {len(WORDS)} sessions")
    with contextlib.ExitStack() as stack:
        replicas = [stack.enter_context(served_app()) for _ in range(args.replicas)]
        url = replicas[0]
        if args.replicas > 1:
            url = stack.enter_context(
                served_nginx([replica.removeprefix("http://") for replica in replicas])).url
        print(f"{args.replicas} replica(s), {os.cpu_count()} cores, OMP_NUM_THREADS="
              f"{os.environ['OMP_NUM_THREADS']}", flush=True)
        if args.without_browser:
            for replica in replicas:   # warm-up, each replica: models loaded, not counted
                measure_protocol_level(replica, 1, WORDS, 0)
            print("sessions  load(1m)  server's first heatmap: median/slowest"
                  "   own sentence: median/slowest", flush=True)
        else:
            browser = stack.enter_context(launch_chromium())
            for replica in replicas:   # warm-up, each replica: models loaded, not counted
                measure_level(browser, replica, 1, WORDS[:1], 0)
            print("sessions  load(1m)  open: median/slowest   of which after the WebSocket"
                  "   own sentence: median/slowest", flush=True)
        for round_number, count in enumerate(args.levels, start=1):
            load = os.getloadavg()[0]
            started = time.perf_counter()
            if args.without_browser:
                opened, own = measure_protocol_level(url, count, WORDS, round_number)
                shown = f"{_pair(opened)}                {_pair(own)}"
            else:
                opened, served, own = measure_level(browser, url, count, WORDS[:count],
                                                    round_number)
                shown = f"{_pair(opened)}   {_pair(served)}   {_pair(own)}"
            print(f"{count:8d}  {load:8.1f}  {shown}"
                  f"   ({time.perf_counter() - started:.0f} s)", flush=True)
        for replica in replicas:
            memory = _replica_memory_mib(replica)
            print(f"replica {replica}: RSS {memory:.0f} MiB" if memory else
                  f"replica {replica}: RSS unknown")


if __name__ == "__main__":
    main()
