"""The package as a user installs it: `pip wheel --no-deps .` from the tracked files, installed
into a new, empty venv, then `attention-explorer --help`, one `export` and `serve`, run from a
folder outside the checkout.

Offline, the new venv cannot download the pinned dependencies, so it is made empty
(`python -m venv`, no system site-packages), the wheel goes in with `--no-deps --no-index`, and
one .pth file puts this test run's venv's site-packages (where requirements.txt is installed) at
the END of its path for the dependencies only: the project's own modules (models, ui, viz, cli,
app.py, pages/, data/) are not in that venv (they run from the checkout there), so everything of
the project that runs here comes from the wheel, which the test checks.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEP_TIMEOUT_S = 600
START_TIMEOUT_S = 120


def tracked_copy(target: Path) -> Path:
    """The checkout's tracked files (what a clone has; links kept as links) in `target`."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        source = ROOT / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / name, follow_symlinks=False)
    return target


def environment(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


def run(command: list, folder: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], cwd=folder, capture_output=True,
                          text=True, timeout=STEP_TIMEOUT_S, env=environment(**extra))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the new venv's folder, a working folder outside the checkout)."""
    base = tmp_path_factory.mktemp("wheel")
    source = tracked_copy(base / "source")
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--no-index", "-w", base / "dist", source], base)
    assert built.returncode == 0, built.stderr
    wheel, = (base / "dist").glob("attention_explorer-*.whl")
    venv = base / "venv"
    made = run([sys.executable, "-m", "venv", venv], base)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    added = run([python, "-m", "pip", "install", "--no-deps", "--no-index", wheel], base)
    assert added.returncode == 0, added.stderr
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                    base).stdout.strip())
    (site / "zz_shared_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    work = base / "work"
    work.mkdir()
    return venv, site, work


def test_the_installed_command_runs_from_the_wheel(installed):
    venv, site, work = installed
    where = run([venv / "bin" / "python", "-c",
                 "import importlib.util as u; print(*(u.find_spec(name).origin or "
                 "list(u.find_spec(name).submodule_search_locations)[0] for name in "
                 "('app', 'cli', 'models', 'ui', 'viz', 'attention_explorer', 'pages', "
                 "'data', 'assets', 'static')))"], work)
    assert where.returncode == 0, where.stderr
    found = where.stdout.split()
    assert len(found) == 10
    for path in found:
        assert Path(path).is_relative_to(site)
    helped = run([venv / "bin" / "attention-explorer", "--help"], work)
    assert helped.returncode == 0
    for name in ("serve", "export", "corpus", "patch", "config"):
        assert f"    {name} " in helped.stdout


def test_the_installed_command_exports(installed):
    venv, _, work = installed
    out = work / "map.html"
    done = run([venv / "bin" / "attention-explorer", "export", "--text", "The zebra grazed.",
                "--view", "heatmap", "--layer", "1", "--head", "2", "--format", "html",
                "--out", out.name], work,
               ATTENTION_EXPLORER_CACHE=str(ROOT / ".cache" / "attention-explorer"))
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    assert "<title>Attention map · layer 1 · head 2 · [CLS] the zebra grazed . [SEP]</title>" \
        in page
    assert page.count("plotly.js v") == 1


def test_the_installed_app_draws_its_first_page(installed):
    venv, site, work = installed
    code = ("from streamlit.testing.v1 import AppTest\n"
            f"app = AppTest.from_file({str(site / 'app.py')!r}, default_timeout=240)\n"
            "app.run()\n"
            "print('TITLES:', [title.value for title in app.title])\n"
            "print('EXCEPTIONS:', len(app.exception), 'ERRORS:', len(app.error))\n")
    drawn = run([venv / "bin" / "python", "-c", code], work)
    assert drawn.returncode == 0, drawn.stderr
    assert "TITLES: ['Attention maps']" in drawn.stdout, drawn.stdout + drawn.stderr
    assert "EXCEPTIONS: 0 ERRORS: 0" in drawn.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answer(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except OSError:
        return 0


def test_the_installed_command_serves_the_app_with_its_settings(installed):
    venv, _, work = installed
    port = free_port()
    process = subprocess.Popen(
        [str(venv / "bin" / "attention-explorer"), "serve", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=work, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while answer(f"{url}/_stcore/health") != 200:
            assert process.poll() is None, "serve exited"
            assert time.monotonic() < deadline, "serve did not answer"
            time.sleep(0.5)
        assert answer(f"{url}/") == 200
        # static serving is on only with the app's own settings (.streamlit/config.toml), which
        # Streamlit would not find from this working folder by itself
        assert answer(f"{url}/app/static/.gitkeep") == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
