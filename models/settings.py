"""The app's configuration: defaults, a TOML file, environment variables (this order, the later
winning).

- Defaults: every budget in models/limits.py (its integer constants but the units and the values
  derived from others), and the settings of SETTINGS below.
- The file: `attention-explorer.toml` in the working folder, or the path in
  ATTENTION_EXPLORER_CONFIG; keys are the lower-case names (`model_bytes = 536870912`,
  `trace_cache_bytes = "256 MiB"`, `local_models = "off"`).
- The environment: ATTENTION_EXPLORER_<NAME> (`ATTENTION_EXPLORER_MODEL_BYTES=512MiB`).

Budgets reach the code as models/limits.py's constants (limits.py asks `configured_budgets` for
the values in force). The other settings are read where they always were, from their environment
variables: a value from the file is put into the environment at start (never over a value the
environment already has), so the loader, the cache, the Ray workers and models/threads.py (the
`threads` setting) see it.

A wrong value (an unknown key, a wrong type, a budget below what one input needs, a file that is
not TOML) is a ConfigError with one sentence naming the key; `check()` raises it, and the app and
the command line call it before anything else.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from models.loading.embedded import DEFAULT_DECODER, DEFAULT_MODEL

PREFIX = "ATTENTION_EXPLORER_"
CONFIG_ENV = f"{PREFIX}CONFIG"
CONFIG_FILE = "attention-explorer.toml"
DEFAULT = "default"
UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6,
         "mib": 2**20, "g": 2**30, "gb": 10**9, "gib": 2**30}
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.I)
# limits.py's names that are not budgets: units, and values computed from other budgets.
NOT_BUDGETS = ("KIB", "MIB", "GIB", "FINE_TUNING_UPLOAD_MIB", "CORPUS_UPLOAD_MIB",
               "DECK_UPLOAD_MIB", "STREAMLIT_UPLOAD_MIB")


class ConfigError(ValueError):
    """A configuration value the app cannot start with; the message is one sentence."""


@dataclass(frozen=True)
class Setting:
    """A setting that is not a budget: read by its code from `env` (ATTENTION_EXPLORER_<NAME>)."""

    name: str
    default: str
    help: str
    choices: tuple[str, ...] = ()
    whole_number: bool = False

    @property
    def env(self) -> str:
        return PREFIX + self.name.upper()

    def check(self, value: str, where: str) -> str:
        if self.choices and value.lower() not in self.choices:
            raise ConfigError(f"{self.name} ({where}) must be one of {', '.join(self.choices)}, "
                              f"not '{value}'.")
        if self.whole_number and not re.fullmatch(r"\s*[1-9]\d*\s*", value):
            raise ConfigError(f"{self.name} ({where}) must be a whole number of at least 1, "
                              f"not '{value}'.")
        return value


SETTINGS = (
    Setting("cache", "~/.cache/attention-explorer",
            "the cache folder (the converted SmolLM2, corpus analyses, the Hub's models)"),
    Setting("local_models", "any",
            "which model folders may be loaded: any, off, or folders joined by ':'"),
    Setting("hub", "off", "whether models may be downloaded from the Hugging Face Hub",
            choices=("on", "off", "1", "0", "true", "false", "yes", "no")),
    Setting("encoder", DEFAULT_MODEL,
            "the default encoder (the embedded MiniLM unless another is named)"),
    Setting("decoder", DEFAULT_DECODER,
            "the default decoder (the embedded SmolLM2 unless another is named)"),
    Setting("threads", "", "torch's threads per process (models/threads.py reads it; empty: "
                           "torch's default)", whole_number=True),
)
SETTING_NAMES = {setting.name: setting for setting in SETTINGS}


@dataclass(frozen=True)
class Value:
    """One setting in force: its value and where it came from ("default", the file's path, or
    the environment variable's name)."""

    name: str
    value: object
    source: str


def config_path() -> Path | None:
    """The configuration file in force: $ATTENTION_EXPLORER_CONFIG (which must exist), else
    ./attention-explorer.toml when there is one."""
    named = os.environ.get(CONFIG_ENV, "").strip()
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"{CONFIG_ENV} names {named}, which is not a file.")
        return path
    local = Path.cwd() / CONFIG_FILE
    return local if local.is_file() else None


def read_file(path: Path | None) -> dict[str, object]:
    if path is None:
        return {}
    try:
        with path.open("rb") as handle:
            table = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"The configuration file {path} cannot be read as TOML "
                          f"({' '.join(str(error).split())}).") from None
    return {str(key).lower(): value for key, value in table.items()}


def whole_number(name: str, value: object, where: str) -> int:
    """A budget's value: an integer, or a string such as "512 MiB" / "2GB" / "20000"."""
    if isinstance(value, bool):
        raise ConfigError(f"{name} ({where}) must be a whole number, not {value!r}.")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        found = SIZE.match(value)
        if found and found.group(2).lower() in UNITS:
            number = float(found.group(1)) * UNITS[found.group(2).lower()]
            if number == int(number):
                return int(number)
    raise ConfigError(f"{name} ({where}) must be a whole number (or a size such as "
                      f"\"512 MiB\"), not {value!r}.")


# A budget below one of these cannot serve one input (or contradicts another budget): name, the
# budget it must reach (a number, or another budget's name), and what that is.
AT_LEAST = (
    ("TRACE_CACHE_BYTES", "DECODER_ATTENTION_BYTES", "one decoder's attentions at its token limit"),
    ("EXPORT_DISK_BYTES", "MAX_EXPORT_BYTES", "one export file"),
    ("PATCH_GRID_BYTES", "PATCH_BATCH_BYTES", "one patched forward"),
    ("MAX_EPOCHS", "PAGE_EPOCHS", "the fine-tuning page's epochs"),
    ("MAX_RETRAIN_STEPS", "MIN_RETRAIN_STEPS", "the fewest retraining steps"),
    ("LONG_TOKENS", "EXACT_MAP_TOKENS", "the longest map drawn exactly"),
    ("MODEL_BYTES", 1 * 2**20, "the smallest model"),
    ("MESSAGE_BYTES", 10**6, "one Streamlit message unit (server.maxMessageSize is in MB)"),
    ("WIDGET_STATE_BYTES", 10**6, "one Streamlit widget-state unit"),
    ("MIN_MODEL_TOKENS", 2, "a query and a key"),
)
LEAST_BUDGET = 1  # every budget: at least one byte, token, entry or step


class Configuration:
    """The values in force, read once per process (`current()`); `reload()` reads again."""

    def __init__(self):
        self.path = config_path()
        self.file = read_file(self.path)
        self._where = f"in {self.path}" if self.path else ""

    def source_of(self, name: str) -> tuple[object, str] | None:
        """(raw value, source) from the environment or the file, or None."""
        env = PREFIX + name.upper()
        if os.environ.get(env, "").strip():
            return os.environ[env].strip(), env
        if name.lower() in self.file:
            return self.file[name.lower()], str(self.path)
        return None

    def budgets(self, defaults: dict[str, int]) -> list[Value]:
        values = []
        for name, default in defaults.items():
            found = self.source_of(name)
            if found is None:
                values.append(Value(name, default, DEFAULT))
            else:
                values.append(Value(name, whole_number(name.lower(), found[0], found[1]),
                                    found[1]))
        in_force = {value.name: value for value in values}
        for value in values:
            if value.value < LEAST_BUDGET:
                raise ConfigError(f"{value.name.lower()} ({value.source}) must be at least "
                                  f"{LEAST_BUDGET}, not {value.value}.")
        for name, floor, what in AT_LEAST:
            if name not in in_force:
                continue
            least = in_force[floor].value if isinstance(floor, str) else floor
            value = in_force[name]
            if value.value < least:
                named = f" ({floor.lower()} = {least:,})" if isinstance(floor, str) else ""
                raise ConfigError(f"{name.lower()} ({value.source}) is {value.value:,}, below "
                                  f"{least:,}: {what}{named} would not fit.")
        return values

    def settings(self) -> list[Value]:
        values = []
        for setting in SETTINGS:
            found = self.source_of(setting.name)
            if found is None:
                values.append(Value(setting.name, setting.default, DEFAULT))
                continue
            raw, source = found
            if not isinstance(raw, (str, int)) or isinstance(raw, bool):
                raise ConfigError(f"{setting.name} ({source}) must be text, not {raw!r}.")
            values.append(Value(setting.name, setting.check(str(raw), source), source))
        return values

    def unknown_keys(self, budget_names) -> list[str]:
        known = {name.lower() for name in budget_names} | set(SETTING_NAMES)
        return sorted(key for key in self.file if key not in known)


def budget_defaults(namespace: dict) -> dict[str, int]:
    """limits.py's budgets: its upper-case integer constants but NOT_BUDGETS."""
    return {name: value for name, value in namespace.items()
            if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
            and name not in NOT_BUDGETS}


_PROBLEMS: dict[str, ConfigError] = {}  # "budgets", "settings": the first problem of each
_BUDGETS: list[Value] = []
_SETTINGS: list[Value] = []


def configured_budgets(namespace: dict) -> dict[str, int]:
    """The budgets in force for limits.py's `namespace` (its defaults). A wrong configuration
    leaves the defaults in force and is kept for `check()` to raise: importing never fails."""
    global _BUDGETS
    _settings()  # the other settings too, into the environment before any code reads it
    defaults = budget_defaults(namespace)
    _BUDGETS = [Value(name, value, DEFAULT) for name, value in defaults.items()]
    _PROBLEMS.pop("budgets", None)
    try:
        configuration = Configuration()
        unknown = configuration.unknown_keys(defaults)
        if unknown:
            raise ConfigError(f"{unknown[0]} (in {configuration.path}) is not a setting: see "
                              "`attention-explorer config` for the known ones.")
        _BUDGETS = configuration.budgets(defaults)
    except ConfigError as error:
        _PROBLEMS["budgets"] = error
        return defaults
    return {value.name: value.value for value in _BUDGETS}


def _settings() -> list[Value]:
    """The settings in force, read once; the file's values are put into the environment for the
    code that reads them there (never over the environment's own)."""
    global _SETTINGS
    if _SETTINGS:
        return _SETTINGS
    try:
        found = Configuration().settings()
    except ConfigError as error:
        _PROBLEMS["settings"] = error
        found = [Value(setting.name, setting.default, DEFAULT) for setting in SETTINGS]
    for value in found:
        if value.source != DEFAULT and not value.source.startswith(PREFIX):
            os.environ.setdefault(PREFIX + value.name.upper(), str(value.value))
    _SETTINGS = found
    return found


def check() -> None:
    """Raise the configuration's first problem (one sentence naming the key), if any. The entry
    points call it after importing models.limits (which reads the budgets)."""
    if not _BUDGETS:
        raise RuntimeError("import models.limits before checking the configuration")
    _settings()
    for part in ("budgets", "settings"):
        if part in _PROBLEMS:
            raise _PROBLEMS[part]


def effective() -> list[Value]:
    """Every setting in force with its source (budgets first), after `check()`."""
    check()
    return [*_BUDGETS, *_settings()]


def setting(name: str) -> str:
    """A non-budget setting's value in force (the environment's, the file's, or the default)."""
    for value in _settings():
        if value.name == name:
            return str(value.value)
    raise KeyError(name)
