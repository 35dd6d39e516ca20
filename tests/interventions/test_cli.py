"""`attention-explorer patch`: the console script, installed from pyproject.toml the way
scripts/setup.sh installs it (`pip install --no-deps -e .`) into a throwaway virtual environment
that reads the project's installed packages, writes the grid as CSV with the engine's numbers;
the same command run in this process (`cli.main.main`, as tests/cli/test_command_line.py runs
`export`) writes the per-head grid, and a mistake ends in one sentence and exit status 1."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from cli import main as cli
from models.experiments import contrast, patching

ROOT = Path(__file__).resolve().parents[2]
CLEAN, CORRUPTED = "The capital of France is", "The capital of Italy is"


@pytest.fixture(scope="module")
def console_script(tmp_path_factory) -> Path:
    """bin/attention-explorer of a new environment with the checkout installed editable."""
    home = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True)
    site = subprocess.run([str(home / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    shared = os.path.realpath(sysconfig.get_paths()["purelib"])  # torch, transformers, ...
    Path(site, "project_packages.pth").write_text(shared + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(home / "bin" / "python"),
                    "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "--disable-pip-version-check", "-e", str(ROOT)], check=True)
    return home / "bin" / "attention-explorer"


def run(script: Path, *arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    """The script, run from a folder other than the checkout (it must not need the cwd)."""
    return subprocess.run([str(script), *arguments], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)


def run_here(capsys, *arguments: str) -> tuple[int, str]:
    """The same command in this process (its models already loaded): exit status and stderr."""
    try:
        status = cli.main(list(arguments))
    except SystemExit as leaving:  # argparse's own refusals
        status = leaving.code
    return status, capsys.readouterr().err


def written_matches_the_engine(rows: list[dict], decoder_runner, site: str,
                               column: str) -> np.ndarray:
    """The CSV's values as a (layers, columns) grid, checked against the engine's own grid of
    the same prompts; returned for the test's further checks."""
    pair = contrast.prompt_pair(decoder_runner, CLEAN, CORRUPTED)
    difference = contrast.logit_difference(decoder_runner, pair.clean, "Paris", "Rome",
                                           pair.corrupted)
    grid = patching.patching_grid(decoder_runner, pair, difference, site)
    written = np.zeros(grid.values.shape)
    for row in rows:
        written[int(row["layer"]), int(row[column])] = float(row["value"])
    np.testing.assert_allclose(written, grid.values, atol=1e-4)
    return written


def test_patch_writes_one_row_per_cell_with_the_engines_values(console_script, tmp_path,
                                                               decoder_runner):
    out = tmp_path / "grid.csv"
    done = run(console_script, "patch", "--model", "decoder", "--clean", CLEAN, "--corrupted",
               CORRUPTED, "--answer", "Paris", "--wrong", "Rome", "--site", "resid_pre",
               "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(rows[0]) == ["layer", "position", "token", "value"] and len(rows) == 30 * 5
    written = written_matches_the_engine(rows, decoder_runner, patching.RESID_PRE, "position")
    assert [row["token"] for row in rows[:5]] == ["The", " capital", " of", " France", " is"]
    assert written[0, 3] == pytest.approx(1.0, abs=1e-4)  # the token that differs: all of it
    assert "wrote 150 cells of resid_pre" in done.stderr


def test_patch_writes_the_per_head_grid_with_the_engines_values(tmp_path, decoder_runner,
                                                               capsys):
    heads = tmp_path / "heads.csv"
    status, err = run_here(capsys, "patch", "--clean", CLEAN, "--corrupted", CORRUPTED,
                           "--answer", "Paris", "--wrong", "Rome", "--site", "head", "--out",
                           str(heads))
    assert status == 0, err
    rows = list(csv.DictReader(heads.open(encoding="utf-8")))
    assert list(rows[0]) == ["layer", "head", "value"] and len(rows) == 30 * 9
    written_matches_the_engine(rows, decoder_runner, patching.HEAD, "head")
    assert "wrote 270 cells of head" in err


def test_help_and_one_sentence_errors(console_script, tmp_path, decoder_runner, capsys):
    shown = run(console_script, "patch", "--help", cwd=tmp_path)
    assert shown.returncode == 0 and "--site {resid_pre,attn_out,mlp_out,head," in shown.stdout
    status, err = run_here(capsys, "patch", "--clean", CLEAN, "--corrupted",
                           "The capital of the Italian republic is", "--answer", "Paris",
                           "--wrong", "Rome", "--out", str(tmp_path / "no.csv"))
    assert status == 1 and not (tmp_path / "no.csv").exists()
    assert err.strip().splitlines()[-1] == (
        "attention-explorer: error: The corrupted prompt has 2 tokens more than the clean one "
        "(7 against 5): patching puts the clean run's values back position by position, so both "
        "need the same number of tokens.")
    assert "Traceback" not in err
    wrong_model = run(console_script, "patch", "--model", "quantum", "--clean", CLEAN,
                      "--corrupted", CORRUPTED, "--answer", "Paris", "--wrong", "Rome", "--out",
                      str(tmp_path / "no.csv"), cwd=tmp_path)
    assert wrong_model.returncode == 2 and "'quantum' is not a model" in wrong_model.stderr
