"""`attention-explorer prepare`: it builds each part the cache lacks (and says so), leaves the
parts already there, and its parts are the very folders the pages read: after it runs, the
converted SmolLM2, the trained toy translator and the shipped corpus's analysis are found where
the decoder loader, the encoder-decoder page and the Corpus page look for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli import main as cli
from models import prepare as preparing
from models.prepare import Part, prepare


def part(name: str, there: bool, log: list[str], fractions=(0.1, 0.3, 0.6, 0.8, 1.0),
         fills: bool = True) -> Part:
    state = {"there": there}

    def build(done) -> None:
        log.append(f"build {name}")
        for fraction in fractions:
            done(fraction)
        state["there"] = fills

    return Part(name, lambda: state["there"], build)


def test_only_the_missing_parts_are_built_in_order_with_their_progress():
    log, said = [], []
    parts = (part("a", False, log), part("b", True, log), part("c", False, log))
    assert prepare(said.append, parts) == ["a", "c"]
    assert log == ["build a", "build c"]
    assert said == ["a: building…", "a: 30%", "a: 60%", "a: done", "b: already in the cache",
                    "c: building…", "c: 30%", "c: 60%", "c: done"]
    assert prepare(said.append, parts) == []  # a second run builds nothing


def test_a_part_the_cache_still_lacks_after_building_is_an_error_not_a_success():
    said = []
    with pytest.raises(OSError, match="cache does not hold it"):
        prepare(said.append, (part("a", False, [], fills=False), part("b", False, [])))
    assert said == ["a: building…", "a: 30%", "a: 60%"]  # neither "done" nor part b


def test_an_empty_cache_lacks_every_part(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))
    assert [p.ready() for p in preparing.PARTS] == [False, False, False]


def test_the_command_fills_the_cache_the_pages_read(capsys):
    """Run on the test session's cache (the test setup has already prepared it, so this is
    quick there; on an unprepared cache it builds the three parts). Afterwards each is where its
    page looks: the decoder loads from the converted folder without converting, the toy
    translator loads from disk, the Corpus page's folder holds a finished analysis."""
    status = cli.main(["prepare"])
    err = capsys.readouterr().err
    assert status == 0, err
    for p in preparing.PARTS:
        assert f"attention-explorer: {p.name}: " in err
        assert p.ready()
    from models.corpus.result import CorpusResult
    from models.corpus.shipped import SHIPPED_CORPUS, shipped_folder
    from models.loading.conversion import prepare_default_decoder
    from models.teaching.seq2seq_training import load_or_train

    assert prepare_default_decoder() is False  # there: nothing converted
    trained = load_or_train(progress=lambda *step: pytest.fail("the toy translator trained"))
    assert trained.held_out_accuracy > 0.9
    result = CorpusResult.open(shipped_folder())
    passages = [line for line in SHIPPED_CORPUS.read_text(encoding="utf-8").splitlines()
                if line.strip()]
    assert result.summary["corpus"]["passages"] == len(passages)


def test_a_librarys_own_progress_bar_stays_out_of_the_commands_output():
    """transformers' GGUF conversion (prepare's first part) draws a tqdm bar of its own, which
    transformers' switch does not reach: a command that loads a model prints its own lines only.
    Run in a fresh interpreter (tqdm reads its settings once, when imported), with a command
    that draws such a bar where prepare's conversion would."""
    script = ("import sys\nfrom cli import main as cli\n"
              "def bar(arguments):\n"
              "    from tqdm import tqdm\n"
              "    for _ in tqdm(range(3), desc='Converting tensors'):\n"
              "        pass\n"
              "cli.COMMANDS['prepare'] = bar\n"
              "sys.exit(cli.main(['prepare']))\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"})
    assert done.returncode == 0, done.stderr
    assert "Converting tensors" not in done.stderr + done.stdout
