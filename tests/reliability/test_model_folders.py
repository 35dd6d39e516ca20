"""Issue 22, rows 4, 6 and 7: whatever is wrong in a model folder becomes the loader's one
sentence (files nested 100,000 levels deep, pipes, devices, a tokenizer that reads fewer than 2
tokens), and whether a server folder exists is never revealed."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from models.errors import ModelLoadError
from models.loading.decoder import load_decoder
from models.loading.hf_seq2seq import load_seq2seq
from models.loading.loader_checks import LOCAL_MODELS_ENV
from models.loading.pretrained import load_pretrained
from models.loading.source import load
from tests.app_support import APP, TIMEOUT_S, assert_no_failure, figures, shown
from tests.reliability.support import SENTENCE, nested, one_sentence, tiny_bert, write_json

DEPTH = 100_000
LOADERS = [load_pretrained, load_decoder, load_seq2seq, load]
LOAD_TIMEOUT_S = 60  # a loader stuck on a pipe would never return


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny") / "bert")


@pytest.fixture
def copy(bert, tmp_path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(bert, folder)
    return folder


def refused(name: str, loader=load_pretrained) -> str:
    """The one sentence `loader(name)` refuses with (it must finish, and raise nothing else)."""
    outcome: dict = {}

    def attempt() -> None:
        try:
            loader(name)
        except ModelLoadError as error:
            outcome["message"] = str(error)
        except BaseException as error:  # noqa: BLE001 - recorded, then the test fails on it
            outcome["other"] = error

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(LOAD_TIMEOUT_S)
    assert not worker.is_alive(), f"{loader.__name__}({name!r}) did not return"
    assert "other" not in outcome, repr(outcome.get("other"))
    assert "message" in outcome, "loaded, not refused"
    return one_sentence(outcome["message"])


# Row 4: files nested 100,000 levels deep.

def _deep_header(path: Path) -> None:
    raw = ('{"a":' + nested(DEPTH) + "}").encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)


@pytest.mark.parametrize("file, write, expected", [
    ("config.json", lambda path: path.write_text(nested(DEPTH)),
     "its config.json is nested too deeply to be read"),
    ("config.json", lambda path: path.write_text('{"model_type": "bert", "x": '
                                                 + nested(DEPTH, "{\"a\":", "}") + "}"),
     "its config.json is nested too deeply to be read"),
    ("model.safetensors", _deep_header, "model.safetensors is not a valid safetensors file"),
    ("model.safetensors.index.json", lambda path: path.write_text(nested(DEPTH)),
     "is not a valid index of weight files"),
    ("tokenizer.json", lambda path: path.write_text(nested(DEPTH)), "Could not load"),
    ("tokenizer_config.json", lambda path: path.write_text(nested(DEPTH)),
     "one of its files is nested too deeply to be read"),
])
@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: getattr(loader, "__name__", ""))
def test_files_nested_100000_deep_are_one_sentence(copy, file, write, expected, loader):
    if file == "model.safetensors.index.json":
        (copy / "model.safetensors").unlink()
    write(copy / file)
    if file.startswith("tokenizer") and loader in (load_decoder, load_seq2seq):
        expected = "it is a 'bert' model"  # refused for its type before its tokenizer is read
    assert expected in refused(str(copy), loader)


def test_a_number_of_5000_digits_in_config_json_is_one_sentence(copy):
    (copy / "config.json").write_text('{"model_type": "bert", "hidden_size": ' + "7" * 5000 + "}")
    assert "its config.json holds a number too long to be read" in refused(str(copy))


def test_undecodable_files_are_one_sentence(copy):
    (copy / "tokenizer_config.json").write_bytes(b'{"model_max_length": "\xff\xfe"}')
    assert "Could not load" in refused(str(copy))


# Pipes and devices never reach a loader (one would wait forever, the other fill the memory).

@pytest.mark.parametrize("make", [
    lambda path: os.mkfifo(path),
    lambda path: path.symlink_to("/dev/zero"),
], ids=["pipe", "device"])
@pytest.mark.parametrize("file", ["tokenizer.json", "vocab.txt", "generation_config.json"])
def test_a_pipe_or_a_device_in_the_folder_is_refused(copy, make, file):
    target = copy / file
    target.unlink(missing_ok=True)
    make(target)
    assert f"'{file}' in its folder is not a regular file" in refused(str(copy))


# Row 6: a tokenizer that says it reads fewer than 2 tokens.

@pytest.mark.parametrize("length", [-5, 0, 1, "many"])
def test_a_tokenizer_below_two_tokens_falls_back_to_the_models_positions(copy, length):
    settings = json.loads((copy / "tokenizer_config.json").read_text())
    write_json(copy / "tokenizer_config.json", settings | {"model_max_length": length})
    loaded = load_pretrained(str(copy))
    assert loaded.max_tokens == 32  # the config's max_position_embeddings
    assert loaded.tokenizer.model_max_length == 32
    from tests.reference import encoder_record

    assert encoder_record(loaded, SENTENCE).tokens == tuple(SENTENCE.split())


def test_a_model_with_one_position_is_refused_in_one_sentence(tmp_path):
    folder = tiny_bert(tmp_path / "one", max_position_embeddings=1)
    message = refused(str(folder))
    assert "it reads at most 1 token, and a model must read at least 2" in message


def test_the_sidebar_loads_it_and_every_page_keeps_working(copy):
    settings = json.loads((copy / "tokenizer_config.json").read_text())
    write_json(copy / "tokenizer_config.json", settings | {"model_max_length": -5})
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["sb_text"] = SENTENCE
    at.run()
    at.sidebar.text_input(key="sb_model_input").set_value(str(copy))
    at.sidebar.button(key="sb_model_load").click()
    at.run()
    assert_no_failure(at)
    assert f"Loaded '{copy}'" in shown(at.sidebar.success[0].value)
    assert len(figures(at)[1]["data"]) == 2  # a layer of the tiny BERT: its 2 heads
    for page in ("all_heads", "predictions", "head_statistics"):
        at.switch_page(f"pages/{page}.py").run()
        assert_no_failure(at)


# Row 7: no path probing.

def _same_sentence(names: list[str]) -> set[str]:
    return {refused(name).replace(name, "<name>") for name in names}


def test_a_missing_folder_and_one_that_is_not_a_model_read_the_same(tmp_path, monkeypatch):
    monkeypatch.delenv(LOCAL_MODELS_ENV, raising=False)  # the default policy: any folder
    (tmp_path / "empty").mkdir()
    (tmp_path / "a file").write_text("x")
    (tmp_path / "private").mkdir(mode=0o700)
    (tmp_path / "private" / "id_rsa").write_text("secret")
    (tmp_path / "config.json as a folder" / "config.json").mkdir(parents=True)
    names = ["/root/.ssh", "/nonexistent", "/etc", "/proc/self", "/dev/null",
             *(str(tmp_path / name) for name in ("empty", "a file", "private", "nowhere",
                                                 "config.json as a folder"))]
    sentences = _same_sentence(names)
    assert sentences == {"Could not load '<name>': there is no model folder by that name here (a "
                         "folder with config.json and .safetensors weights)."}


def test_names_shaped_like_hub_ids_do_not_probe_relative_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "owner" / "exists").mkdir(parents=True)
    sentences = _same_sentence(["owner/exists", "owner/missing", "exists", "missing"])
    assert len(sentences) == 1 and "downloading from the Hugging Face Hub is turned off" in \
        sentences.pop()


def test_with_local_folders_off_every_folder_reads_the_same(tmp_path, bert, monkeypatch):
    monkeypatch.setenv(LOCAL_MODELS_ENV, "off")
    sentences = _same_sentence(["/root/.ssh", "/nonexistent", str(bert), str(tmp_path)])
    assert sentences == {"Could not load '<name>': this server does not load models from its own "
                         "folders, only Hugging Face model ids."}
