"""docs/notebooks/tour.ipynb runs top to bottom, offline, on this checkout's interpreter.

The notebook is executed by nbclient on an ipykernel registered in a temporary folder that
points at the Python running this test (the checkout's .venv after ./test.sh's setup), so it
needs no Jupyter set up on the machine. Any cell that raises fails the test, with the cell and
its error in the message.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
from ipykernel.kernelspec import install as install_kernel
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "docs" / "notebooks" / "tour.ipynb"
KERNEL = "attention-explorer-tour"
CELL_TIMEOUT_S = 300  # one cell, on a loaded 2-core machine (the whole tour takes ~40 s alone)


def _kernel_manager(prefix: Path) -> KernelSpecManager:
    """A kernel spec named KERNEL in `prefix` whose argv runs this interpreter."""
    install_kernel(kernel_name=KERNEL, display_name="Attention Explorer (.venv)",
                   prefix=str(prefix))
    folder = prefix / "share" / "jupyter" / "kernels" / KERNEL
    spec = json.loads((folder / "kernel.json").read_text(encoding="utf-8"))
    assert Path(spec["argv"][0]).resolve() == Path(sys.executable).resolve()
    manager = KernelSpecManager()
    manager.kernel_dirs = [str(folder.parent)]
    return manager


def test_the_tour_is_stored_without_outputs():
    notebook = nbformat.read(TOUR, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, "the tour has no code cells"
    assert all(not cell.outputs and cell.execution_count is None for cell in code)


def test_the_tour_runs_top_to_bottom_offline(tmp_path, monkeypatch):
    notebook = nbformat.read(TOUR, as_version=4)
    manager = _kernel_manager(tmp_path / "kernel")
    # the kernel inherits this environment: offline (conftest), one thread, the shared model cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    kernel = KernelManager(kernel_name=KERNEL, kernel_spec_manager=manager)
    client = NotebookClient(notebook, km=kernel, kernel_name=KERNEL, timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except CellExecutionError as error:
        raise AssertionError(f"a cell of {TOUR.name} failed:\n{error}") from None
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code), "not every code cell ran"
    errors = [output for cell in code for output in cell.outputs if output.output_type == "error"]
    assert not errors
    written = sorted(path.name for path in tmp_path.glob("attention-explorer-tour-*/*"))
    assert written == ["corpus", "head.html", "maps.npz"]
    html = next(tmp_path.glob("attention-explorer-tour-*/head.html")).read_text(encoding="utf-8")
    assert "Head 5" in html and "<script src=\"http" not in html   # the title, plotly inlined
