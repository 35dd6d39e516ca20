"""Issue 22, row 2: a model's size is counted from the model its config builds (on the meta device),
not from a list of key spellings, everywhere a model is loaded; and weight files that cannot fill
the model are refused before it is built. Each refusal is one sentence with this process's
memory flat.

Each config below spells its sizes in a way the old key-spelling estimate did not read (it took
0 to 0.37 GiB for models of 2.75 to 8.2 GiB): bloom's `n_embed`/`n_layer`, T5's `d_kv` and
`num_decoder_layers`, BART's `decoder_layers`, XLNet's `d_inner`, Qwen2-MoE's
`moe_intermediate_size`. Each folder holds a tokenizer and a safetensors file of one tensor.
"""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest
from transformers import AutoConfig, AutoModel

from models.errors import ModelLoadError
from models.limits import MODEL_BYTES
from models.loading.decoder import load_decoder
from models.loading.hf_seq2seq import load_seq2seq
from models.loading.pretrained import load_pretrained
from models.loading.size_checks import model_size, skeleton
from models.loading.source import load
from tests.app_support import APP, TIMEOUT_S, assert_no_failure, figures, shown
from tests.reliability.support import (RSS_TOLERANCE_BYTES, config_folder, one_sentence, rss,
                                       tiny_bert)

SPELLINGS = {
    "bloom": {"model_type": "bloom", "n_embed": 2048, "n_layer": 20, "n_head": 16,
              "vocab_size": 49152},
    "t5": {"model_type": "t5", "d_model": 1024, "d_kv": 128, "num_heads": 16, "num_layers": 12,
           "num_decoder_layers": 24, "d_ff": 4096, "vocab_size": 32128},
    "bart": {"model_type": "bart", "d_model": 1024, "encoder_layers": 12, "decoder_layers": 48,
             "encoder_attention_heads": 16, "decoder_attention_heads": 16,
             "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096, "vocab_size": 50265},
    "xlnet": {"model_type": "xlnet", "d_model": 512, "n_layer": 24, "n_head": 8,
              "d_inner": 65536, "vocab_size": 32000},
    "qwen2_moe": {"model_type": "qwen2_moe", "hidden_size": 1024, "num_hidden_layers": 16,
                  "num_attention_heads": 16, "num_key_value_heads": 16, "num_experts": 16,
                  "num_experts_per_tok": 4, "moe_intermediate_size": 2048,
                  "intermediate_size": 64, "shared_expert_intermediate_size": 2048,
                  "vocab_size": 32000},
}
LOADERS = {"encoder": load_pretrained, "decoder": load_decoder, "encoder–decoder": load_seq2seq,
           "Python API and command line": lambda name: load(name)}
SIZE_REFUSAL = (r"its config\.json describes a model of about [0-9.,]+ (million|billion) "
                r"parameters \([0-9.,]+ GB in memory\), more than this server's limit of 1\.0 GB "
                r"per model")


@pytest.fixture(scope="module", autouse=True)
def warm_meta_device():
    """The first model built on the meta device imports torch's meta kernels (tens of MB of
    code, once per process): build one small skeleton before any memory is measured."""
    skeleton("warm-up", AutoConfig.for_model("bert", hidden_size=8, num_hidden_layers=1,
                                             num_attention_heads=1, intermediate_size=8),
             AutoModel)


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_each_spelling_is_counted_from_the_built_model(spelling):
    size = model_size(skeleton(spelling, AutoConfig.for_model(**SPELLINGS[spelling]), AutoModel))
    assert size.nbytes > 2.5 * 2**30  # every one of them is several times the budget
    assert size.parameters * 4 > MODEL_BYTES


@pytest.mark.parametrize("front", sorted(LOADERS))
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_a_model_too_large_is_refused_before_anything_is_built(spelling, front, tmp_path):
    folder = config_folder(tmp_path / spelling, SPELLINGS[spelling])
    # the architecture's code imported first (tens of MB the first time, whatever the size):
    # what is measured is what the refusal itself holds
    skeleton(spelling, AutoConfig.for_model(**SPELLINGS[spelling]), AutoModel)
    before = rss()
    with pytest.raises(ModelLoadError) as refusal:
        LOADERS[front](str(folder))
    grown = rss() - before
    message = one_sentence(str(refusal.value))
    assert f"Could not load '{folder}'" in message
    assert re.search(SIZE_REFUSAL, message), message
    assert grown < RSS_TOLERANCE_BYTES, f"{grown / 2**20:.0f} MB"


def test_weights_that_cannot_fill_a_model_within_budget_are_refused_before_it_is_built(tmp_path):
    """A 0.8 GB bloom (within the budget) with one small tensor for weights: transformers would
    build all of it before finding the weights missing; the header count refuses it first."""
    settings = SPELLINGS["bloom"] | {"n_embed": 1024, "n_layer": 12}
    folder = config_folder(tmp_path / "bloom-small", settings)
    size = model_size(skeleton("bloom", AutoConfig.for_model(**settings), AutoModel))
    assert 0.5 * MODEL_BYTES < size.nbytes < MODEL_BYTES
    before = rss()
    for loader in (load_decoder, load):
        with pytest.raises(ModelLoadError, match=r"its weights do not cover the model \(its "
                                                 r"weight files hold 16 numbers for "):
            loader(str(folder))
    assert rss() - before < RSS_TOLERANCE_BYTES


def test_a_config_claiming_millions_of_layers_stops_while_it_builds(tmp_path):
    folder = config_folder(tmp_path / "deep", {"model_type": "gpt2", "n_embd": 2, "n_head": 1,
                                               "n_layer": 50_000_000, "vocab_size": 10})
    before = rss()
    with pytest.raises(ModelLoadError, match="builds more than 20,000 weight tensors"):
        load_decoder(str(folder))  # the message's count proves the build stopped there
    assert rss() - before < RSS_TOLERANCE_BYTES


def test_a_number_no_model_has_is_refused_under_any_key(tmp_path):
    folder = config_folder(tmp_path / "huge", SPELLINGS["bloom"])
    settings = (folder / "config.json").read_text().replace('"n_embed": 2048',
                                                            '"n_embed": ' + "9" * 60)
    (folder / "config.json").write_text(settings)
    with pytest.raises(ModelLoadError, match="config.json's n_embed is a number of more than 40 "
                                             "digits, which no model can have"):
        load_decoder(str(folder))


def test_models_within_the_budget_still_load_and_count_exactly(tmp_path, default_model):
    folder = tiny_bert(tmp_path / "tiny")
    loaded = load_pretrained(str(folder))
    counted = model_size(skeleton("tiny", loaded.model.config, AutoModel)).parameters
    assert counted == sum(p.numel() for p in loaded.model.parameters())
    implementation = default_model.model.config._attn_implementation
    counted = model_size(skeleton("minilm", default_model.model.config, AutoModel)).parameters
    assert counted == sum(p.numel() for p in default_model.model.parameters())
    # counting a loaded model's config leaves that model running the hooked attention
    assert default_model.model.config._attn_implementation == implementation


def _app(page: str | None = None, state: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if page is not None:
        at.switch_page(f"pages/{page}.py")
    at.run()
    assert_no_failure(at)
    return at


def test_the_sidebar_refuses_it_in_one_sentence_and_the_page_keeps_working(tmp_path):
    folder = config_folder(tmp_path / "bloom", SPELLINGS["bloom"])
    at = _app()
    before = rss()
    at.sidebar.text_input(key="sb_model_input").set_value(str(folder))
    at.sidebar.button(key="sb_model_load").click()
    at.run()
    assert_no_failure(at)
    assert rss() - before < RSS_TOLERANCE_BYTES
    error = one_sentence(shown(at.sidebar.error[0].value))
    assert re.search(SIZE_REFUSAL, error), error
    assert len(figures(at)[1]["data"]) == 12  # still the embedded MiniLM: 12 heads a layer


def test_the_encoder_decoder_page_refuses_it_in_one_sentence(tmp_path):
    folder = config_folder(tmp_path / "t5", SPELLINGS["t5"])
    at = _app("cross_attention", {"xattn_model": "hub"})  # not the toy translator
    before = rss()
    at.text_input(key="xattn_hf_input").set_value(str(folder))
    at.button(key="xattn_hf_load").click()
    at.run()
    assert_no_failure(at)
    assert rss() - before < RSS_TOLERANCE_BYTES
    errors = [shown(e.value) for e in at.error]
    assert any(re.search(SIZE_REFUSAL, error) for error in errors), errors
