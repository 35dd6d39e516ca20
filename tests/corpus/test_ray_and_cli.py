"""`attention-explorer corpus` writes the folder, in this process and on Ray (Ray Data, an actor
pool loading the model once per actor) with equal results; one local Ray for the module."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cli.main import main
from models.corpus.ray_engine import PROJECT
from tests.corpus.support import tables, write_lines

ATOL = 1e-5
ACTORS = 2


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray: more logical CPUs than actors (else Ray Data's read stage can wait forever
    for a slot), no dashboard; shut down after the module."""
    import ray

    ray.init(num_cpus=ACTORS + 1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {
                 "PYTHONPATH": str(PROJECT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                 "ATTENTION_EXPLORER_CACHE": os.environ["ATTENTION_EXPLORER_CACHE"]}})
    yield ray
    ray.shutdown()


def corpus(arguments: list[str]) -> int:
    return main(["corpus", *arguments])


def test_the_command_writes_the_same_folder_in_process_and_on_ray(tmp_path, local_ray, capsys):
    source = write_lines(tmp_path)
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert corpus([str(source), "--model", "encoder", "--out", str(local), "--batch-size",
                   "3"]) == 0
    status = corpus([str(source), "--model", "encoder", "--out", str(on_ray), "--batch-size",
                     "3", "--engine", "ray", "--actors", str(ACTORS)])
    assert status == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "12 of 12 passages" in err and f"wrote {on_ray}" in err
    for name in ("corpus.json", "heads.parquet", "passages.parquet", "texts.parquet",
                 "head_distances.npy", "embedding/queries.npy", "embedding/keys.npy",
                 "embedding/points.parquet"):
        assert (local / name).is_file() and (on_ray / name).is_file(), name
    assert not (local / ".work").exists() and not (on_ray / ".work").exists()
    mine, theirs = tables(local), tables(on_ray)
    for name, frame in mine.items():
        other = theirs[name]
        assert list(frame.columns) == list(other.columns) and len(frame) == len(other)
        numbers = frame.select_dtypes("number").columns
        np.testing.assert_allclose(frame[numbers].to_numpy(float), other[numbers].to_numpy(float),
                                   rtol=0, atol=ATOL, equal_nan=True)
        for column in frame.columns.difference(numbers):
            assert frame[column].tolist() == other[column].tolist()
    np.testing.assert_allclose(np.load(local / "head_distances.npy"),
                               np.load(on_ray / "head_distances.npy"), rtol=0, atol=ATOL)
    np.testing.assert_array_equal(np.load(local / "embedding/queries.npy"),
                                  np.load(on_ray / "embedding/queries.npy"))
    assert (mine["heads"]["entropy_mean"] > 0).all()


def test_the_commands_mistakes_are_one_sentence(tmp_path, capsys):
    assert corpus([str(tmp_path / "missing.txt"), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.strip() == (
        f"attention-explorer: error: There is no corpus file at {tmp_path / 'missing.txt'}.")
    source = write_lines(tmp_path)
    assert corpus([str(source), "--out", str(tmp_path / "o"), "--ray-address",
                   "127.0.0.1:1"]) == 1
    assert "No Ray cluster answers at 127.0.0.1:1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit):
        corpus([str(source), "--out", str(tmp_path / "o"), "--batch-size", "0"])
    assert "is not a whole number of at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["corpus", "--help"])
    assert "--ray-address ADDRESS" in capsys.readouterr().out
