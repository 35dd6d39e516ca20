"""models/ and viz/ never import streamlit; viz/ never builds or runs a model.

viz/ may use torch only to hand tensors to bertviz, whose API takes them.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "models": {"streamlit"},
    "viz": {"streamlit", "transformers"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_forbidden_modules(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package}/ has no Python files"
    for path in files:
        bad = imported_modules(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


# The records viz/ may read: every attention record, the step-by-step record of one row, and
# the prediction summaries of a language-model head.
RECORD_MODULES = {"models.hooks.record", "models.teaching.arithmetic", "models.experiments.predictions"}


def test_viz_reads_only_records_from_models():
    for path in sorted((ROOT / "viz").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("models"):
                assert node.module in RECORD_MODULES, f"{path.name} imports {node.module}"


def test_every_page_runs_through_app():
    for path in sorted((ROOT / "pages").glob("*.py")):
        assert "through_app()" in path.read_text(), f"{path.name} does not call through_app()"
