"""Every budget and limit is stated once, in models/limits.py, and every computed value goes through
the one store (models/store/): read from the source with `ast`, so a new file cannot slip past.
"""

from __future__ import annotations

import ast
from pathlib import Path

from models import limits

ROOT = Path(__file__).resolve().parents[2]
LIMITS = ROOT / "models" / "limits.py"
UNITS = {"KIB", "MIB", "GIB"}
# Byte sizes that split work or estimate a file, not what is kept or accepted (limits.py's rule).
NOT_LIMITS = {
    "HASH_CHUNK_BYTES",  # models/loading/conversion_cache.py: a file is hashed this much at a time
    "WRITE_BUFFER_BYTES",  # ui/export_files.py: an export is written this much at a time
    "NPZ_HEADER_BYTES",  # viz/export.py: what an NPZ's headers add to its size, estimated
    "COPY_BYTES",  # models/corpus/blocks.py: a joined array is copied this much at a time
    "UNITS",  # models/settings.py: what "MiB" and the other units in a setting's value mean
    "AT_LEAST",  # models/settings.py: the least each budget must be, to refuse a wrong value
}
# A deck's slide titles and speaker notes have their own, smaller limits (models/limits.py).
TEXT_LIMITS = {"MAX_TEXT_CHARS", "MODEL_NAME_CHARS", "DECK_TITLE_CHARS", "DECK_NOTE_CHARS"}


def sources() -> list[Path]:
    folders = ("models", "ui", "pages", "viz")
    files = [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]
    return files + sorted(ROOT.glob("*.py"))


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _power_of_two_bytes(node: ast.AST) -> bool:
    """`2**20`, `2**30`, `1 << 20` and the like: a size in bytes written out."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.right, ast.Constant):
        return False
    exponent = node.right.value
    return ((isinstance(node.op, ast.Pow) and getattr(node.left, "value", None) == 2
             and exponent in (10, 20, 30))
            or (isinstance(node.op, ast.LShift) and exponent in (10, 20, 30)))


def _size_in_bytes(value: ast.expr) -> bool:
    """An expression written as a size in bytes: with MIB, GIB or KIB, `2**20`, `1 << 20`, or
    a multiple of 1024."""
    for node in ast.walk(value):
        if isinstance(node, ast.Name) and node.id in UNITS or _power_of_two_bytes(node):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and any(
                getattr(side, "value", None) == 1024 for side in (node.left, node.right)):
            return True
    return False


def test_byte_budgets_live_only_in_limits():
    found = []
    for path in sources():
        if path == LIMITS:
            continue
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.Assign):
                continue
            names = {getattr(target, "id", "") for target in node.targets}
            if names & UNITS or (_size_in_bytes(node.value) and not names <= NOT_LIMITS):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} defines {sorted(names)}")
    assert not found, found


def test_every_limit_has_its_own_comment_and_is_used():
    lines = LIMITS.read_text().splitlines()
    everything_else = "\n".join(path.read_text() for path in sources() if path != LIMITS)
    names = []
    for node in parsed(LIMITS).body:
        if isinstance(node, ast.Assign) and node.targets[0].id not in UNITS:
            name = node.targets[0].id
            names.append(name)
            assert lines[node.lineno - 2].startswith("#"), f"{name} has no comment above it"
            assert name in everything_else, f"{name} is stated but nothing uses it"
    assert "TRACE_BYTES" not in names and len(names) == len(set(names))
    assert all(isinstance(getattr(limits, name), int) and getattr(limits, name) > 0
               for name in names)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def test_every_text_box_accepts_the_one_text_limit():
    """A text box takes MAX_TEXT_CHARS (a model name box MODEL_NAME_CHARS), never a number."""
    boxes = 0
    for path in sources():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
                    "text_input", "text_area"):
                boxes += 1
                limit = _keyword(node, "max_chars")
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                assert isinstance(limit, ast.Name) and limit.id in TEXT_LIMITS, where
    assert boxes >= 10  # the sidebar's three, and the pages' own


def test_one_store_mechanism_and_one_way_to_key():
    """No Streamlit caches, no stores made outside models/store/stores.py, stores read as
    `stores.NAME` when used, and no key written as a bare tuple."""
    declared = ROOT / "models" / "store" / "stores.py"
    for path in sources():
        where = str(path.relative_to(ROOT))
        tree = parsed(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("cache_resource", "cache_data"):
                raise AssertionError(f"{where}:{node.lineno} uses st.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "models.store.stores":
                raise AssertionError(f"{where} imports a store by name (read stores.NAME)")
            if not isinstance(node, ast.Call):
                continue
            called = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if called == "Store":
                assert path == declared, f"{where}:{node.lineno} makes a store of its own"
            if called in ("kept", "_kept", "get", "put") and node.args and any(
                    isinstance(argument, ast.Tuple) and argument.elts
                    and isinstance(argument.elts[0], ast.Constant)
                    and isinstance(argument.elts[0].value, str) for argument in node.args[:2]):
                raise AssertionError(f"{where}:{node.lineno} keys a value with a tuple")
