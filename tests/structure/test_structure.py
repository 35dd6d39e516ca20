"""The shape of the code: one engine under four fronts, kept true by parsing imports with ast.

- No import cycle anywhere in the project (models, viz, ui, pages, app, the API, the CLI).
- Layering: models/ imports neither ui/, viz/, pages/ nor streamlit; viz/ imports neither ui/,
  pages/ nor streamlit and builds no model; ui/ imports no page.
- Pages do not fork on an input's length: no `read_all`, no `long_*` module.
- models/ keeps at most MAX_TOP_MODULES modules at its top; the rest live in sub-packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "viz", "ui", "pages", "attention_explorer", "cli")
MAX_TOP_MODULES = 8
FORBIDDEN = {
    "models": {"ui", "viz", "pages", "streamlit"},
    "viz": {"ui", "pages", "streamlit"},
    "ui": {"pages"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_files() -> dict[str, Path]:
    files = [path for package in PACKAGES if (ROOT / package).exists()
             for path in ([ROOT / package] if (ROOT / package).is_file() else
                          sorted((ROOT / package).rglob("*.py")))]
    files += [path for path in (ROOT / "app.py", ROOT / "attention_explorer.py", ROOT / "cli.py")
              if path.is_file()]
    return {module_name(path): path for path in files}


def imported(path: Path, name: str) -> set[str]:
    """Every module (and `module.name`) a file imports, absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_files()
    return {name: {target for target in imported(path, name) if target in modules and
                   target != name}
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_anywhere():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layering(package):
    modules = project_files()
    broken = [f"{name} imports {target}" for name, path in modules.items()
              if name.split(".")[0] == package
              for target in imported(path, name) if target.split(".")[0] in FORBIDDEN[package]]
    assert broken == []


def test_viz_builds_and_runs_no_model():
    for name, path in project_files().items():
        if name.split(".")[0] != "viz":
            continue
        targets = {target.split(".")[0] for target in imported(path, name)}
        assert "transformers" not in targets, f"{name} imports transformers"


def test_pages_do_not_fork_on_an_inputs_length():
    for name, path in project_files().items():
        if name.split(".")[0] != "pages":
            continue
        assert "read_all" not in path.read_text(), f"{name} mentions read_all"
        for target in imported(path, name):
            assert not target.split(".")[-1].startswith("long_"), f"{name} imports {target}"


def test_models_keeps_few_modules_at_its_top():
    top = sorted(path.name for path in (ROOT / "models").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    packages = [path.name for path in (ROOT / "models").iterdir()
                if path.is_dir() and (path / "__init__.py").is_file()]
    assert len(packages) >= 5, packages
