"""Reading a corpus: each format gives the same passages, and each bad file gives one sentence
(and leaves no job behind)."""

from __future__ import annotations

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from models.corpus.job import JobSettings, run_corpus
from models.corpus.reading import CorpusInputError, Passage, count_passages, describe, \
    read_passages
from models.corpus.ray_engine import RAY_MISSING, check_ray
from tests.corpus.support import PASSAGES, write_lines

PAIRS = ["It was happy.", "", "Really?"]


def passages(path, **options) -> list[Passage]:
    return [p for block in read_passages(path, **options) for p in block]


def test_every_format_gives_the_same_passages(tmp_path):
    texts = PASSAGES[:3]
    lines = write_lines(tmp_path, texts)
    paragraphs = tmp_path / "paragraphs.txt"
    paragraphs.write_text("The cat sat\non the mat.\n\nA dog barked at the mailman,\nwho ran "
                          "away quickly!\n\n\nTime flies like an arrow; fruit flies like a "
                          "banana.\n", encoding="utf-8")
    csv_path = tmp_path / "passages.csv"
    csv_path.write_text("id,text,text_pair\n" + "\n".join(
        f'{i},"{t}",{p}' for i, (t, p) in enumerate(zip(texts, PAIRS))) + "\n", encoding="utf-8")
    jsonl = tmp_path / "passages.jsonl"
    jsonl.write_text("\n".join(json.dumps({"text": t, "text_pair": p or None})
                               for t, p in zip(texts, PAIRS)) + "\n", encoding="utf-8")
    parquet = tmp_path / "passages.parquet"
    pq.write_table(pa.table({"text": texts, "text_pair": PAIRS}), parquet)
    for path in (lines, paragraphs):
        assert [p.text for p in passages(path)] == texts
    for path in (csv_path, jsonl, parquet):
        found = passages(path)
        assert [p.text for p in found] == texts and [p.index for p in found] == [0, 1, 2]
        assert [p.pair for p in found] == ["It was happy.", None, "Really?"]
    assert [p.text for p in passages(lines, limit=2)] == texts[:2]
    assert [len(b) for b in read_passages(write_lines(tmp_path, PASSAGES), block=5)] == [5, 5, 2]


@pytest.mark.parametrize("name, content, message", [
    ("empty.txt", b"", "is empty"),
    ("blank.txt", b"\n   \n\n", "holds no passage"),
    ("binary.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "looks like a binary file"),
    ("latin.txt", "Caf\u00e9 au lait.\n".encode("latin-1"), "is not UTF-8 text"),
    ("nocolumn.csv", b"id,sentence\n1,The cat sat.\n", "has no 'text' column"),
    ("nofield.jsonl", b'{"sentence": "The cat sat."}\n', "has no 'text' field"),
    ("broken.jsonl", b'{"text": "The cat sat."\n', "is not a JSON object"),
    ("notparquet.parquet", b"PAR1 this is not parquet", "is not a readable Parquet file"),
])
def test_a_bad_file_is_one_sentence(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(CorpusInputError, match=message) as error:
        count_passages(path)
    assert str(error.value).count(". ") == 0 and str(error.value).endswith(".")
    assert name in str(error.value)
    # A file kept under another name (an upload) is named as the person called it.
    kept = tmp_path / f"upload-0123{path.suffix}"
    kept.write_bytes(content)
    with pytest.raises(CorpusInputError, match=message) as error:
        count_passages(describe(kept, f"my {name}"))
    assert f"my {name}" in str(error.value) and kept.name not in str(error.value)


def test_a_parquet_file_without_a_text_column_is_refused(tmp_path):
    path = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"sentence": ["a"], "n": [1]}), path)
    with pytest.raises(CorpusInputError, match="has no 'text' column"):
        count_passages(path)


def test_more_passages_than_an_upload_takes_is_refused(tmp_path):
    path = write_lines(tmp_path)
    assert count_passages(path, most=len(PASSAGES)) == len(PASSAGES)
    with pytest.raises(CorpusInputError, match=f"more than {len(PASSAGES) - 1} passages"):
        count_passages(path, most=len(PASSAGES) - 1)


def test_a_failed_job_leaves_nothing_that_looks_finished(tmp_path, encoder_runner):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence\nThe cat sat.\n", encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(CorpusInputError, match="^people.csv has no 'text' column"):
        run_corpus(bad, out, loaded=encoder_runner, name="people.csv")
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ValueError, match="is not an empty folder"):
        run_corpus(write_lines(tmp_path), out, loaded=encoder_runner)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_a_passage_longer_than_the_limit_is_cut_and_counted(tmp_path, encoder_runner):
    out = tmp_path / "out"
    summary = run_corpus(write_lines(tmp_path), out, loaded=encoder_runner,
                         settings=JobSettings(max_tokens=12), name="my passages.txt")
    corpus = summary["corpus"]
    assert corpus["name"] == "my passages.txt"
    lengths = [len(encoder_runner.encode(text)[0].tokens) for text in PASSAGES]
    assert corpus["token_limit"] == 12
    assert corpus["truncated_passages"] == sum(n > 12 for n in lengths) > 0
    assert corpus["dropped_tokens"] == sum(max(n - 12, 0) for n in lengths)
    assert corpus["tokens"] == sum(min(n, 12) for n in lengths)


def test_ray_missing_or_unreachable_is_one_sentence(monkeypatch):
    with pytest.raises(ValueError, match="No Ray cluster answers at 127.0.0.1:1"):
        check_ray("127.0.0.1:1")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    with pytest.raises(ValueError) as error:
        check_ray(None)
    assert str(error.value) == RAY_MISSING and "pip install 'ray[data]==2.60.0'" in RAY_MISSING
