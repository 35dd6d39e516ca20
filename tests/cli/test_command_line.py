"""The `attention-explorer` command line: every subcommand's help, `export` end to end on the
embedded MiniLM, the Streamlit command `serve` builds, and mistakes that end in one sentence and a
non-zero exit (a bad model, layer, view, output path), never a stack trace."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

from cli import main as cli
from models.hooks.access import read
from models.loading.source import load
from models.limits import STREAMLIT_UPLOAD_MIB
from viz.export import head_csv
from viz.style import FIGURE_TEXT_COLOR

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = ("serve", "export", "corpus", "patch", "prepare", "config")
TEXT = "The zebra grazed quietly."


def run(capsys, *argv) -> tuple[int, str, str]:
    try:
        status = cli.main(list(argv))
    except SystemExit as leaving:  # argparse: --help (0) and malformed command lines (2)
        status = leaving.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_help_lists_every_subcommand_and_each_has_its_own(capsys):
    status, out, _ = run(capsys, "--help")
    assert status == 0
    for name in SUBCOMMANDS:
        assert f"    {name} " in out
    for name in SUBCOMMANDS:
        status, out, _ = run(capsys, name, "--help")
        assert status == 0 and out.startswith(f"usage: attention-explorer {name}")
    _, out, _ = run(capsys, "export", "--help")
    for option in ("--model", "--text", "--pair", "--view", "--layer", "--head", "--format",
                   "--scale", "--presenter", "--out"):
        assert option in out
    for view in ("heatmap", "all_heads", "model_view", "head_view", "rollout", "statistics"):
        assert view in out


def test_export_writes_the_same_head_the_engine_reads(capsys, tmp_path):
    out = tmp_path / "head.csv"
    status, _, err = run(capsys, "export", "--text", TEXT, "--view", "heatmap", "--layer", "2",
                         "--head", "5", "--format", "csv", "--out", str(out))
    assert status == 0, err
    assert "loading the model" in err and f"wrote {out}" in err  # progress on stderr
    expected = read(load("encoder"), TEXT, long=False).record
    assert out.read_bytes() == head_csv(expected, 2, 5)


def test_an_exported_figure_has_the_apps_readable_text(capsys, tmp_path):
    """A figure file draws its text as the app does: axis text with AA contrast (not Plotly's
    grey) and the colour bar's title beside the bar, clear of its top tick label."""
    out = tmp_path / "head.html"
    status, _, err = run(capsys, "export", "--text", TEXT, "--view", "heatmap", "--format",
                         "html", "--out", str(out))
    assert status == 0, err
    page = out.read_text(encoding="utf-8")
    assert f'"tickfont":{{"color":"{FIGURE_TEXT_COLOR}"' in page.replace(" ", "")
    assert '"side":"right"' in page.replace(" ", "")


def test_export_draws_the_statistics_by_a_norm_based_column_as_the_page_does(capsys, tmp_path):
    out = tmp_path / "norm.html"
    status, _, err = run(capsys, "export", "--text", TEXT, "--view", "statistics",
                         "--statistic", "norm_cls", "--format", "html", "--out", str(out))
    assert status == 0, err
    assert "norm_cls for every layer and head" in out.read_text(encoding="utf-8")


def test_export_json_of_rollout_holds_rows_that_sum_to_one(capsys, tmp_path):
    out = tmp_path / "rollout.json"
    status, _, err = run(capsys, "export", "--text", TEXT, "--view", "rollout", "--format",
                         "json", "--out", str(out))
    assert status == 0, err
    written = json.loads(out.read_text())
    assert written["layer"] == 5  # MiniLM's last layer, the default
    assert "zebra" in written["tokens"]
    np.testing.assert_allclose(np.sum(written["rollout"], axis=1), 1.0, atol=1e-4)


def one_sentence_error(status: int, err: str, fragment: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith("attention-explorer: error:")]
    assert status == 1
    assert len(lines) == 1 and fragment in lines[0], err
    assert "Traceback" not in err


def test_a_model_that_does_not_exist_is_one_sentence(capsys, tmp_path):
    status, _, err = run(capsys, "export", "--model", str(tmp_path / "no-such-model"), "--text",
                         TEXT, "--view", "heatmap", "--format", "csv", "--out",
                         str(tmp_path / "x.csv"))
    one_sentence_error(status, err, "no-such-model")


def test_a_layer_the_model_lacks_is_one_sentence(capsys, tmp_path):
    status, _, err = run(capsys, "export", "--text", TEXT, "--view", "heatmap", "--layer", "99",
                         "--format", "csv", "--out", str(tmp_path / "x.csv"))
    one_sentence_error(status, err, "Layer 99 does not exist: this model has 6 layers")
    assert not (tmp_path / "x.csv").exists()


def test_an_unwritable_path_is_one_sentence_before_any_model_loads(capsys, tmp_path):
    for out, fragment in ((tmp_path / "missing" / "x.csv", "does not exist"),
                          (tmp_path, "is a folder"),
                          (Path("/proc/attention-explorer.csv"), "cannot be written")):
        status, _, err = run(capsys, "export", "--text", TEXT, "--view", "heatmap", "--format",
                             "csv", "--out", str(out))
        one_sentence_error(status, err, fragment)
        if "cannot be written" not in fragment:
            assert "loading the model" not in err


def test_a_format_the_view_cannot_take_is_one_sentence(capsys, tmp_path):
    status, _, err = run(capsys, "export", "--text", TEXT, "--view", "head_view", "--format",
                         "pdf", "--out", str(tmp_path / "x.pdf"))
    one_sentence_error(status, err, "html or svg")


def test_a_view_that_does_not_exist_is_refused_by_the_parser(capsys, tmp_path):
    status, _, err = run(capsys, "export", "--text", TEXT, "--view", "sunburst", "--format",
                         "csv", "--out", str(tmp_path / "x.csv"))
    assert status == 2
    assert "invalid choice: 'sunburst'" in err and "Traceback" not in err


def test_the_real_command_never_prints_a_trace(tmp_path):
    """The console script's own process: a bad layer ends with one line and status 1."""
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "export", "--text", TEXT, "--view", "statistics",
         "--layer", "-1", "--format", "csv", "--out", str(tmp_path / "x.csv")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "attention-explorer: error: Layer -1 does not exist: this model has 6 layers (0 to 5).")


def test_serve_runs_the_packaged_app_with_its_settings_and_passes_options_through():
    command = cli.streamlit_command(["--server.port", "8765", "--server.maxUploadSize=20"])
    assert command[1:5] == ["-m", "ui.launch", "run", str(ROOT / "server.py")]
    # start.sh serves the same way (tests/reliability/test_serving.py starts this command)
    assert (ROOT / "start.sh").read_text().strip().splitlines()[-1].startswith(
        'exec .venv/bin/python -m ui.launch run server.py "$@"')
    with (ROOT / ".streamlit" / "config.toml").open("rb") as handle:
        settings = tomllib.load(handle)
    assert "--server.enableStaticServing=true" in command
    assert f"--client.toolbarMode={settings['client']['toolbarMode']}" in command
    # the user's options come last and replace the app's own
    assert command[-3:] == ["--server.port", "8765", "--server.maxUploadSize=20"]
    assert not any(part.startswith("--server.maxUploadSize=") and part.endswith(
        f"={STREAMLIT_UPLOAD_MIB}") for part in command)
    assert cli.STREAMLIT_SETTINGS.read_bytes() == (ROOT / ".streamlit" / "config.toml").read_bytes()
