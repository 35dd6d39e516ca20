"""The configuration (models/settings.py): defaults, attention-explorer.toml (or the file named by
ATTENTION_EXPLORER_CONFIG), ATTENTION_EXPLORER_<NAME>; the environment wins over the file, the
file over the defaults; the values reach limits.py's constants and the code reading the
environment; a wrong value stops the command line and the app with one sentence naming the key.

Budgets are read once per process (limits.py's constants), so what crosses a start-up runs in a
new process; the rules themselves are checked in this one on `Configuration`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import models.limits
from models import settings
from models.settings import ConfigError, Configuration, budget_defaults

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = budget_defaults(vars(models.limits))
TRACE_ENV = "ATTENTION_EXPLORER_TRACE_CACHE_BYTES"


def clean_environment(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(settings.PREFIX) or name == "ATTENTION_EXPLORER_CACHE"}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def run_python(code_or_args: list[str], folder: Path, **env: str):
    return subprocess.run([sys.executable, *code_or_args], cwd=folder, capture_output=True,
                          text=True, timeout=300, env=clean_environment(**env))


def config_lines(output: str) -> dict[str, tuple[str, str]]:
    found = {}
    for line in output.splitlines():
        assignment, _, source = line.partition("  # ")
        key, _, value = assignment.partition(" = ")
        found[key.strip()] = (value.strip(), source.strip())
    return found


def test_environment_over_file_over_defaults_reaches_the_code(tmp_path):
    config = tmp_path / settings.CONFIG_FILE
    config.write_text('model_bytes = "512 MiB"\ntrace_cache_bytes = 300000000\n'
                      'local_models = "off"\n', encoding="utf-8")
    result = run_python(["-m", "cli.main", "config"], tmp_path, **{TRACE_ENV: "256MiB"})
    assert result.returncode == 0, result.stderr
    shown = config_lines(result.stdout)
    assert shown["model_bytes"] == (str(512 * 2**20), str(config))
    assert shown["trace_cache_bytes"] == (str(256 * 2**20), TRACE_ENV)
    assert shown["max_text_chars"] == (str(DEFAULTS["MAX_TEXT_CHARS"]), "default")
    assert shown["local_models"] == ('"off"', str(config))
    assert set(shown) >= {name.lower() for name in DEFAULTS} | set(settings.SETTING_NAMES)
    # the values in force are the constants the code imports, and the environment's readers
    # see the file's setting
    result = run_python(["-c", "import models.limits as l; "
                         "from models.loading.loader_checks import folder_policy; "
                         "print(l.MODEL_BYTES, l.TRACE_CACHE_BYTES, folder_policy().mode)"],
                        tmp_path, **{TRACE_ENV: "256MiB"})
    assert result.stdout.split() == [str(512 * 2**20), str(256 * 2**20), "off"], result.stderr


def test_the_file_named_by_the_environment_is_read(tmp_path):
    named = tmp_path / "elsewhere.toml"
    named.write_text("max_new_tokens = 7\n", encoding="utf-8")
    result = run_python(["-m", "cli.main", "config"], tmp_path,
                        ATTENTION_EXPLORER_CONFIG=str(named))
    assert config_lines(result.stdout)["max_new_tokens"] == ("7", str(named))


@pytest.mark.parametrize("content, env, fragment", [
    ("moddel_bytes = 5\n", {}, "moddel_bytes (in "),
    ("", {TRACE_ENV: "1 MiB"}, "trace_cache_bytes (ATTENTION_EXPLORER_TRACE_CACHE_BYTES) is "
                               "1,048,576, below 134,217,728"),
])
def test_a_wrong_value_stops_the_command_line_with_one_sentence_naming_it(tmp_path, content,
                                                                         env, fragment):
    (tmp_path / settings.CONFIG_FILE).write_text(content, encoding="utf-8")
    result = run_python(["-m", "cli.main", "export", "--text", "x", "--view", "heatmap",
                         "--format", "csv", "--out", str(tmp_path / "x.csv")], tmp_path, **env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("content, env, fragment", [
    ("model_bytes = true\n", {}, "model_bytes (/"),
    ("model_bytes = [1]\n", {}, "model_bytes (/"),
    ("", {"ATTENTION_EXPLORER_MAX_NEW_TOKENS": "lots"}, "max_new_tokens (ATTENTION_EXPLORER_"),
    ("", {"ATTENTION_EXPLORER_LOCAL_MODELS": ""}, None),
    ("threads = 0\n", {}, "threads (/"),
    ("hub = \"maybe\"\n", {}, "hub (/"),
    ("encoder = 3.5\n", {}, "encoder (/"),
])
def test_a_wrong_value_is_one_sentence_naming_it(monkeypatch, tmp_path, content, env, fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / settings.CONFIG_FILE).write_text(content, encoding="utf-8")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    configuration = Configuration()
    if fragment is None:  # an empty variable is not set
        configuration.budgets(DEFAULTS)
        configuration.settings()
        return
    with pytest.raises(ConfigError) as raised:
        configuration.budgets(DEFAULTS)
        configuration.settings()
    message = str(raised.value)
    assert message.startswith(fragment) and message.endswith(".") and "\n" not in message


def test_a_wrong_value_stops_the_app_with_the_sentence(tmp_path):
    code = ("from streamlit.testing.v1 import AppTest\n"
            f"app = AppTest.from_file({str(ROOT / 'app.py')!r}, default_timeout=120)\n"
            "app.run()\n"
            "print('ERRORS:', [error.value for error in app.error])\n"
            "print('TITLES:', [title.value for title in app.title])\n")
    result = run_python(["-c", code], tmp_path, ATTENTION_EXPLORER_MAX_TEXT_CHARS="0")
    assert result.returncode == 0, result.stderr
    errors = result.stdout.split("ERRORS:")[1].split("TITLES:")
    assert "max_text_chars (ATTENTION_EXPLORER_MAX_TEXT_CHARS) must be at least 1" in errors[0]
    assert errors[1].strip() == "[]"  # no page was drawn


def test_sizes_are_read_with_units(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    hub_env = "ATTENTION_EXPLORER_HUB_CACHE_BYTES"
    for text, expected in (("512 MiB", 512 * 2**20), ("2GB", 2 * 10**9), ("1.5 GiB", 3 * 2**29),
                           ("20000", 20_000)):
        monkeypatch.setenv(hub_env, text)
        values = {value.name: value.value for value in Configuration().budgets(DEFAULTS)}
        assert values["HUB_CACHE_BYTES"] == expected
    for wrong in ("0.5 B", "12 parsecs", "-3"):
        monkeypatch.setenv(hub_env, wrong)
        with pytest.raises(ConfigError, match="^hub_cache_bytes"):
            Configuration().budgets(DEFAULTS)


def test_budgets_that_contradict_each_other_are_refused(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTENTION_EXPLORER_MAX_EXPORT_BYTES", "900 MiB")
    with pytest.raises(ConfigError, match=r"^export_disk_bytes \(default\) is .* below "):
        Configuration().budgets(DEFAULTS)


def test_a_file_that_is_not_toml_or_not_there_is_one_sentence(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / settings.CONFIG_FILE).write_text("model_bytes = = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be read as TOML"):
        Configuration()
    monkeypatch.setenv(settings.CONFIG_ENV, str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="which is not a file"):
        Configuration()
