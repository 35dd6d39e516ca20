"""The from-scratch encoder–decoder against torch.nn.Transformer, on the same weights."""

from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np
import pytest
import torch
from torch import nn

from models.scratch.attention import MultiHeadAttention
from models.scratch.encoder import EncoderLayer
from models.scratch.seq2seq import DecoderLayer, EncoderDecoder, Seq2SeqConfig, Seq2SeqModel, padding_masks
from models.teaching.seq2seq_training import load_or_train, train, translate
from models.teaching.trained_translator import TrainedTranslator, TrainingSettings, cache_folder
from models.teaching.translation_task import (EXAMPLE_SENTENCES, TaskSettings, check_source, make_task,
                                     reference_translations)
from models.analysis.pooling import max_pool
from models.analysis.statistics import head_statistics
from models.analysis.thumbnails import thumbnails
from models.hooks.record import AttentionRecord
from viz.heatmap import attention_heatmap, layer_heads_grid
from viz.overview import all_heads_figure, tiled
from viz.seq2seq import step_row, step_row_figure
from viz.statistics import statistic_heatmap

TOLERANCE = 1e-5
WIDTH, HEADS, FF, EPS = 32, 4, 64, 1e-5


def config(norm_style: str, **changes) -> Seq2SeqConfig:
    return Seq2SeqConfig(**{"source_vocab_size": 20, "target_vocab_size": 24, "hidden_size": WIDTH,
                            "num_heads": HEADS, "num_encoder_layers": 2, "num_decoder_layers": 3,
                            "intermediate_size": FF, "layer_norm_eps": EPS,
                            "norm_style": norm_style} | changes)


def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    query, key, value = theirs.in_proj_weight.chunk(3)  # (D, D) each
    query_bias, key_bias, value_bias = theirs.in_proj_bias.chunk(3)
    for linear, weight, bias in ((ours.query, query, query_bias), (ours.key, key, key_bias),
                                 (ours.value, value, value_bias),
                                 (ours.output, theirs.out_proj.weight, theirs.out_proj.bias)):
        linear.weight.copy_(weight)
        linear.bias.copy_(bias)


def copy_norm(ours: nn.LayerNorm, theirs: nn.LayerNorm) -> None:
    ours.load_state_dict(theirs.state_dict())


def copy_feed_forward(ours, theirs) -> None:
    ours.feed_forward.expand.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.contract.load_state_dict(theirs.linear2.state_dict())


@torch.no_grad()
def copy_encoder_layer(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer) -> None:
    copy_attention(ours.attention, theirs.self_attn)
    copy_norm(ours.attention_norm, theirs.norm1)
    copy_feed_forward(ours, theirs)
    copy_norm(ours.feed_forward_norm, theirs.norm2)


@torch.no_grad()
def copy_decoder_layer(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer) -> None:
    copy_attention(ours.self_attention, theirs.self_attn)
    copy_norm(ours.self_attention_norm, theirs.norm1)
    copy_attention(ours.cross_attention, theirs.multihead_attn)
    copy_norm(ours.cross_attention_norm, theirs.norm2)
    copy_feed_forward(ours, theirs)
    copy_norm(ours.feed_forward_norm, theirs.norm3)


def randomise(module: nn.Module, seed: int) -> None:
    """Random weights everywhere, LayerNorms included (their default 1/0 would hide mistakes)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)


def inputs(batch=2, sources=5, targets=4, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, sources, WIDTH, generator=generator),
            torch.randn(batch, targets, WIDTH, generator=generator))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    theirs = nn.TransformerDecoderLayer(WIDTH, HEADS, FF, dropout=0.0, activation="gelu",
                                        layer_norm_eps=EPS, batch_first=True,
                                        norm_first=norm_first).eval()
    randomise(theirs, 0)
    ours = DecoderLayer(config("pre" if norm_first else "post").parts()).eval()
    copy_decoder_layer(ours, theirs)
    memory, x = inputs()
    targets = x.size(1)
    causal = nn.Transformer.generate_square_subsequent_mask(targets)  # float, -inf above
    with torch.no_grad():
        expected = theirs(x, memory, tgt_mask=causal, tgt_is_causal=True)
        _, self_mask, cross_mask = padding_masks(torch.ones(2, 5), torch.ones(2, targets))
        got, self_weights, cross_weights = ours(x, memory, self_mask, cross_mask)
        # torch's own weights, read sub-layer by sub-layer
        self_input = theirs.norm1(x) if norm_first else x
        attended, expected_self = theirs.self_attn(self_input, self_input, self_input,
                                                   attn_mask=causal, average_attn_weights=False)
        x = x + attended if norm_first else theirs.norm1(x + attended)
        _, expected_cross = theirs.multihead_attn(theirs.norm2(x) if norm_first else x, memory,
                                                  memory, average_attn_weights=False)
    torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(self_weights, expected_self, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(cross_weights, expected_cross, atol=TOLERANCE, rtol=0)
    assert cross_weights.shape == (2, HEADS, targets, 5)
    torch.testing.assert_close(cross_weights.sum(-1), torch.ones(2, HEADS, targets))
    assert torch.all(self_weights.triu(diagonal=1) == 0.0)


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's notes on its nested tensors
@pytest.mark.parametrize("norm_style", ["post", "pre"])
def test_whole_body_equals_torch_transformer(norm_style):
    theirs = nn.Transformer(WIDTH, HEADS, 2, 3, FF, dropout=0.0, activation="gelu",
                            layer_norm_eps=EPS, batch_first=True,
                            norm_first=norm_style == "pre").eval()
    randomise(theirs, 2)
    ours = EncoderDecoder(config(norm_style)).eval()
    for mine, reference in zip(ours.encoder_layers, theirs.encoder.layers):
        copy_encoder_layer(mine, reference)
    for mine, reference in zip(ours.decoder_layers, theirs.decoder.layers):
        copy_decoder_layer(mine, reference)
    with torch.no_grad():
        copy_norm(ours.encoder_norm, theirs.encoder.norm)
        copy_norm(ours.decoder_norm, theirs.decoder.norm)
    source, target = inputs(batch=3, sources=6, targets=5, seed=3)
    # the second and third sources end in padding; padded keys are hidden from every query
    source_real = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 5 + [0]], dtype=torch.bool)
    target_real = torch.ones(3, 5, dtype=torch.bool)
    encoder_mask, self_mask, cross_mask = padding_masks(source_real, target_real)
    with torch.no_grad():
        expected = theirs(source, target,
                          tgt_mask=nn.Transformer.generate_square_subsequent_mask(5),
                          src_key_padding_mask=~source_real, memory_key_padding_mask=~source_real,
                          tgt_is_causal=True)
        got = ours(source, target, encoder_mask, self_mask, cross_mask)
        expected_memory = theirs.encoder(source, src_key_padding_mask=~source_real)
    torch.testing.assert_close(got.last_hidden_state, expected, atol=TOLERANCE, rtol=0)
    real = source_real[..., None]  # torch's fast path writes zeros at padded source positions
    torch.testing.assert_close(got.memory * real, expected_memory * real, atol=TOLERANCE, rtol=0)
    for weights in got.cross_attentions:  # (B, H, T, S): rows sum to 1 over the real sources
        torch.testing.assert_close(weights.sum(-1), torch.ones(3, HEADS, 5))
        assert torch.all(weights[1, :, :, 4:] == 0.0) and torch.all(weights[2, :, :, 5:] == 0.0)
    for weights in got.decoder_attentions:  # (B, H, T, T)
        assert torch.all(weights.triu(diagonal=1) == 0.0)


def test_model_logits_do_not_depend_on_later_target_tokens_or_on_padding():
    model = Seq2SeqModel(config("pre")).eval()
    source = torch.tensor([[3, 4, 5, 6]])
    target = torch.tensor([[1, 7, 8, 9]])
    changed = torch.tensor([[1, 7, 10, 11]])
    with torch.no_grad():
        first = model(source, target).logits
        second = model(source, changed).logits
        padded = model(torch.tensor([[3, 4, 5, 6, 0, 0]]), target,
                       source_real=torch.tensor([[1, 1, 1, 1, 0, 0]], dtype=torch.bool)).logits
    torch.testing.assert_close(first[:, :2], second[:, :2], atol=1e-5, rtol=0)
    assert not torch.allclose(first[:, 2:], second[:, 2:])
    torch.testing.assert_close(padded, first, atol=1e-5, rtol=0)


@pytest.mark.parametrize("changes, message", [
    ({"hidden_size": 30}, "divisible"),
    ({"num_decoder_layers": 0}, "num_decoder_layers"),
    ({"dropout": 1.0}, "dropout"),
    ({"norm_style": "middle"}, "norm_style"),
    ({"source_vocab_size": 2.5}, "source_vocab_size"),
])
def test_bad_config_raises(changes, message):
    with pytest.raises(ValueError, match=message):
        Seq2SeqConfig(**changes)


# --- the toy translation task, training, translation and the disk cache ------------------------

@lru_cache(maxsize=1)
def real_training() -> TrainedTranslator:
    """The app's own training settings, trained once per test session (seeded)."""
    return train(TrainingSettings())


def short_settings(steps: int = 12) -> TrainingSettings:
    return TrainingSettings(steps=steps, warmup_steps=2, snapshots=3,
                            task=TaskSettings(train_size=2000, held_out_size=100))


def test_task_split_is_seeded_and_held_out_sentences_are_never_trained_on():
    task = make_task(TaskSettings())
    again = make_task.__wrapped__(TaskSettings())
    assert task.train == again.train and task.held_out == again.held_out
    assert not {p.source for p in task.train} & {p.source for p in task.held_out}
    assert (len(task.train), len(task.held_out)) == (8000, 500)
    held = {" ".join(p.source) for p in task.held_out}
    assert set(EXAMPLE_SENTENCES) <= held
    reference = reference_translations()
    assert reference[tuple("the red car is fast".split())] == tuple("la voiture rouge est rapide".split())
    assert reference[tuple("we want the black chairs".split())] == tuple(
        "nous voulons les chaises noires".split())
    assert make_task.__wrapped__(TaskSettings(seed=1)).held_out != task.held_out


def test_out_of_vocabulary_words_are_named_in_one_sentence():
    vocabulary = make_task(TaskSettings()).source_vocabulary
    with pytest.raises(ValueError) as error:
        check_source("The purple car is zorg!", vocabulary)
    message = str(error.value)
    assert "'purple' and 'zorg' are not in" in message and message.count(". ") == 0
    assert check_source("The red car is fast.", vocabulary) == tuple("the red car is fast".split())
    with pytest.raises(ValueError, match="Type an English sentence"):
        check_source("  ", vocabulary)
    with pytest.raises(ValueError, match="at most 12"):
        check_source(" ".join(["red"] * 13), vocabulary)


def test_real_training_reaches_95_percent_on_held_out_sentences():
    trained = real_training()
    assert trained.held_out_accuracy >= 0.95
    assert len(trained.losses) == trained.settings.steps
    assert trained.losses[-1] < trained.losses[0] / 20
    assert tuple(s.step for s in trained.snapshots) == trained.settings.snapshot_steps()
    first, last = trained.snapshots[0].cross, trained.snapshots[-1].cross
    assert first.key_tokens == tuple("the red car is fast".split())
    assert first.tokens == ("<bos>",) + tuple("la voiture rouge est rapide".split())
    # the alignment forms: some head's row that writes "rouge" (query "voiture") looks at "red"
    # far more at the end than at the start
    voiture, red = first.tokens.index("voiture"), first.key_tokens.index("red")
    assert last.weights[:, :, voiture, red].max() > 0.8 > first.weights[:, :, voiture, red].max()


def test_translation_step_by_step_and_its_three_records():
    trained = real_training()
    translation = translate(trained, "The red car is fast.")
    assert translation.text == "la voiture rouge est rapide" and translation.correct
    assert translation.finished and translation.output_tokens[-1] == "<eos>"
    cross, decoder, encoder = translation.cross, translation.decoder, translation.encoder
    assert cross.tokens == ("<bos>",) + translation.words and cross.key_tokens == translation.source_tokens
    assert cross.weights.shape == (2, 4, 6, 5) and encoder.weights.shape == (2, 4, 5, 5)
    np.testing.assert_allclose(cross.weights.sum(-1), 1.0, atol=1e-5)  # over source tokens
    assert np.all(np.triu(decoder.weights, k=1) == 0.0) and decoder.masks == ("causal",)
    # each step's own pass (a shorter prefix) gave the same row as the final pass
    model, vocabulary = trained.model, trained.target_vocabulary
    source = torch.tensor([trained.source_vocabulary.ids(translation.source_tokens)])
    with torch.no_grad():
        memory, _ = model.encode(source)
        for step in range(1, cross.num_tokens + 1):
            prefix = torch.tensor([vocabulary.ids(cross.tokens[:step])])
            row = model.decode(prefix, memory).cross_attentions  # L x (1, H, step, S)
            got = torch.stack(row, 1)[0, :, :, -1].numpy()  # (L, H, S)
            np.testing.assert_allclose(got, cross.weights[:, :, step - 1], atol=1e-5)


def test_disk_cache_round_trip_and_one_training_for_concurrent_callers(tmp_path):
    settings = short_settings()
    calls = []

    def count(step, total, loss):
        if step == 1:
            calls.append(threading.current_thread().name)

    threads = [threading.Thread(target=load_or_train, args=(settings, count, tmp_path),
                                name=f"session {i}") for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1  # one trained, the others read its cache
    folder = cache_folder(settings, tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["model.safetensors", "snapshots.safetensors",
                                                        "training.json"]
    assert not list(tmp_path.glob(".*partial*"))
    cached = load_or_train(settings, count, tmp_path)
    assert cached.from_cache and len(calls) == 1
    fresh = train(settings)  # the same seed gives the same weights
    for name, tensor in fresh.model.state_dict().items():
        torch.testing.assert_close(cached.model.state_dict()[name], tensor, atol=1e-5, rtol=0)
    assert cached.losses == pytest.approx(fresh.losses, abs=1e-6)
    assert cached.held_out_accuracy == fresh.held_out_accuracy
    np.testing.assert_allclose(cached.snapshots[-1].cross.weights, fresh.snapshots[-1].cross.weights,
                               atol=1e-5)
    assert cache_folder(short_settings(13), tmp_path) != folder  # keyed by the settings


@pytest.mark.parametrize("changes, message", [
    ({"steps": 0}, "steps"), ({"warmup_steps": 400}, "warmup_steps"),
    ({"snapshots": 1}, "snapshots"), ({"hidden_size": 30}, "divisible"),
])
def test_bad_training_settings_raise(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainingSettings(**changes)


# --- rectangular records (cross-attention) in the record and the shared views -----------------

def rectangular(queries=("<bos>", "la", "voiture"), keys=("the", "<red>", "car", "."),
                layers=2, heads=3, seed=0) -> AttentionRecord:
    raw = np.random.default_rng(seed).random((layers, heads, len(queries), len(keys)))
    return AttentionRecord(tokens=queries, key_tokens=keys, weights=raw / raw.sum(-1, keepdims=True),
                           source="synthetic")


def test_rectangular_record_validates_its_key_tokens():
    record = rectangular()
    assert (record.num_tokens, record.num_keys, record.is_rectangular) == (3, 4, True)
    assert record.keys == ("the", "<red>", "car", ".")
    square = AttentionRecord(tokens=("a", "b"), weights=np.full((1, 1, 2, 2), 0.5), source="s")
    assert square.keys == ("a", "b") and not square.is_rectangular and square.num_keys == 2
    with pytest.raises(ValueError, match="3 key tokens for attention over 4 keys"):
        AttentionRecord(tokens=("a", "b"), key_tokens=("x", "y", "z"),
                        weights=np.full((1, 1, 2, 4), 0.25), source="s")
    with pytest.raises(ValueError, match="square"):  # without key tokens a map must be square
        AttentionRecord(tokens=("a", "b"), weights=np.full((1, 1, 2, 4), 0.25), source="s")
    with pytest.raises(ValueError, match="sums to"):
        AttentionRecord(tokens=("a",), key_tokens=("x", "y"), weights=np.full((1, 1, 1, 2), 0.4),
                        source="s")


def test_heatmap_and_grid_put_key_tokens_across_and_query_tokens_down():
    record = rectangular()
    figure = attention_heatmap(record, 1, 2)
    trace = figure.data[0]
    np.testing.assert_array_equal(np.asarray(trace.z), record.weights[1, 2])
    assert list(figure.layout.xaxis.ticktext) == ["the", "&lt;red&gt;", "car", "."]
    assert list(figure.layout.yaxis.ticktext) == ["&lt;bos&gt;", "la", "voiture"]
    assert (trace.y[2], trace.x[1]) == ("voiture #2", "&lt;red&gt; #1")
    grid = layer_heads_grid(record, 0)
    assert len(grid.data) == 3
    for head, trace in enumerate(grid.data):
        assert np.asarray(trace.z).shape == (3, 4)
        assert list(trace.customdata[2][1]) == ["voiture #2", "&lt;red&gt; #1"]
    row = step_row(record, 1)
    assert row.tokens == ("la",) and row.key_tokens == record.keys
    np.testing.assert_array_equal(row.weights[:, :, 0], record.weights[:, :, 1])
    assert np.asarray(step_row_figure(record, 1, 0, 0).data[0].z).shape == (1, 4)


def test_all_heads_mosaic_keeps_rectangular_tiles():
    record = rectangular(layers=2, heads=3)
    z = tiled(thumbnails(record).values)
    assert z.shape == (2 * 3, 3 * 4)
    np.testing.assert_array_equal(z[3:6, 8:12], np.rint(record.weights[1, 2] * 100))
    figure = all_heads_figure(thumbnails(record), (1, 2))
    assert figure.layout.shapes[-1].x0 == 2 * 4 - 0.5 and figure.layout.shapes[-1].y0 == 3 - 0.5
    long = rectangular(queries=tuple(f"q{i}" for i in range(100)), keys=("a", "b", "c"), heads=1)
    assert max_pool(long.weights, 64).shape == (2, 1, 64, 3)
    assert "max-pooled to 64×3" in all_heads_figure(thumbnails(long)).layout.title.text


def test_statistics_of_rectangular_records_keep_only_what_applies():
    weights = np.zeros((1, 2, 3, 4))
    weights[0, 0, :, 3] = 1.0  # head 0: everything on the "." key
    weights[0, 1] = 0.25  # head 1: even over the four source tokens
    record = AttentionRecord(tokens=("<bos>", "la", "voiture"), key_tokens=("the", "red", "car", "."),
                             weights=weights, source="synthetic")
    table = head_statistics(record)
    assert list(table["label"]) == ["punctuation", "broad"]
    assert table.loc[0, "punctuation"] == pytest.approx(1.0)
    assert table.loc[1, "entropy_bits"] == pytest.approx(2.0)
    for column in ("mean_distance", "cls", "sep", "self", "previous", "next"):
        assert table[column].isna().all()
    figure = statistic_heatmap(table, "mean_distance")  # every value NaN: still a figure
    assert figure.data[0].zmax > 0
