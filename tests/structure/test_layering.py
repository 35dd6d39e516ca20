"""models/ and viz/ never import streamlit; viz/ never builds or runs a model.

viz/ may use torch only to hand tensors to bertviz, whose API takes them.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


# What viz/ may import from models/, by name: the data types it draws (every attention record,
# the step-by-step record of one row, the prediction summaries of a language-model head, a
# max-pooled map) and the names of the statistics' columns it colours. Never a computation.
RECORD_MODULES = {
    "models.hooks.record": {"AttentionRecord"},
    "models.teaching.arithmetic": {"KeyProducts", "RowArithmetic"},
    "models.experiments.predictions": {"Candidate", "PerPosition"},
    "models.analysis.pooling": {"PooledMap"},
    "models.analysis.columns": {"NUMERIC_COLUMNS", "SHARE_COLUMNS", "NORM_COLUMNS"},
}


def test_viz_reads_only_records_from_models():
    for path in sorted((ROOT / "viz").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("models") for alias in node.names), (
                    f"{path.name} imports a models module whole")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("models"):
                assert node.module in RECORD_MODULES, f"{path.name} imports {node.module}"
                names = {alias.name for alias in node.names}
                assert names <= RECORD_MODULES[node.module], (
                    f"{path.name} imports {sorted(names - RECORD_MODULES[node.module])} from "
                    f"{node.module}")


def test_what_viz_may_import_from_models_is_data_not_computation():
    """Every name allowed above is a dataclass (a data type, not a reducer or a model) or a
    constant, never a function."""
    import dataclasses
    import importlib

    for module, names in RECORD_MODULES.items():
        loaded = importlib.import_module(module)
        for name in names:
            value = getattr(loaded, name)
            if isinstance(value, type):
                assert dataclasses.is_dataclass(value), f"{module}.{name} is not a data type"
            else:
                assert name.isupper() and not callable(value), f"{module}.{name} is a computation"


def test_every_page_runs_through_app():
    for path in sorted((ROOT / "pages").glob("*.py")):
        assert "through_app()" in path.read_text(), f"{path.name} does not call through_app()"
