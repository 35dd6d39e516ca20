"""`attention-explorer`: the app's computations without the browser.

    attention-explorer patch --model decoder --clean TEXT --corrupted TEXT --answer TOKEN \
        --wrong TOKEN --site resid_pre --out FILE.csv
    attention-explorer corpus passages.txt --model encoder --out DIR [--engine ray]
    attention-explorer export --model encoder --text TEXT --view heatmap --format svg --out F
    attention-explorer serve [STREAMLIT OPTIONS]
    attention-explorer prepare
    attention-explorer config

Each subcommand parses its arguments, calls the engine (models/) and writes the result: the
same functions the pages call. The configuration (models/settings.py) is checked first. A user's
mistake ends with one sentence on stderr and exit status 1 (2 for a malformed command line, as
argparse does), never a stack trace.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tomllib
from pathlib import Path

# Only light modules here: `--help`, a mistaken argument and a configuration error answer at
# once (10 s sooner on this machine). A command that computes loads the engine (torch,
# transformers) when it runs, after main() has set the threads.
from cli import export_request
from models import settings
from models.corpus.engines import ENGINES, LOCAL, RAY
from models.errors import ModelLoadError
from models.experiments.sites import RESID_PRE, SITES
from models.limits import CORPUS_BATCH_SIZE
from models.threads import configure_threads

PROGRAM = "attention-explorer"


def model_source(text: str):
    """`decoder`, `pretrained`, or either followed by `:NAME` (a Hugging Face id or a folder),
    as the app's links write the model: a ModelSource. The kind registry loads no torch: a
    mistaken model is refused at once."""
    from models.loading import kinds
    from models.loading.kinds import DECODER, PRETRAINED
    from models.loading.source import ModelSource

    kind_text, _, name = text.partition(":")
    try:
        kind = kinds.spec(kind_text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a model: use decoder, pretrained, decoder:NAME or "
            "pretrained:NAME") from None
    if kind not in (DECODER, PRETRAINED):
        raise argparse.ArgumentTypeError("only pretrained language models can be patched: use "
                                         "decoder or pretrained (a masked LM)")
    return ModelSource(kind, name.strip()) if name.strip() else ModelSource.default(kind)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=(
        "Attention Explorer's computations from the command line."))
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    patch = commands.add_parser(
        "patch", help="activation patching: write one grid as CSV",
        description=(
            "Run the corrupted prompt with one cell of the clean run put back, for every cell "
            "of one site, and write the logit difference logit[answer] - logit[wrong] at the "
            "last position (a masked LM: at its mask), normalised so that the corrupted run is "
            "0 and the clean run 1. Columns: layer,position,token,value for resid_pre, "
            "attn_out and mlp_out; layer,head,value for head, head_pattern and head_values; "
            "layer,head,position,token,value for head_position."))
    patch.add_argument("--model", type=model_source, default="decoder",
                       help="decoder (the embedded SmolLM2, the default), pretrained, or "
                            "decoder:NAME / pretrained:NAME")
    patch.add_argument("--clean", required=True, help="the clean prompt")
    patch.add_argument("--corrupted", required=True,
                       help="the corrupted prompt (as many tokens as the clean one)")
    patch.add_argument("--answer", required=True, help="the clean prompt's answer (one token)")
    patch.add_argument("--wrong", required=True, help="the wrong token (one token)")
    patch.add_argument("--site", choices=SITES, default=RESID_PRE,
                       help="what one cell patches (default: resid_pre)")
    patch.add_argument("--layer", type=int, default=None,
                       help="the layer of the head_position site")
    patch.add_argument("--out", required=True, type=Path, help="the CSV file to write")
    _corpus_parser(commands)
    export_request.add_parser(commands)
    commands.add_parser(
        "serve", help="start the app (streamlit run server.py); Streamlit's options pass through",
        description=(
            "Start the app with Streamlit: `streamlit run server.py` (app.py on Streamlit's ASGI "
            "server, loading the default model as it starts) with the app's own Streamlit "
            "settings (.streamlit/config.toml) and the upload and message limits of the "
            "configuration in force. Every other argument is handed to Streamlit and wins, "
            "e.g. `attention-explorer serve --server.port 8502 --server.headless true`."))
    commands.add_parser(
        "prepare", help="build ahead what pages otherwise build on first open",
        description=(
            "Fill the cache folder (see `attention-explorer config`) with what the app builds "
            "the first time a page needs it: the embedded SmolLM2 converted to float32, the "
            "toy translator trained, the shipped corpus analysed with the default encoder. "
            "Run it once before a class, on the machine that serves. What is already in the "
            "cache is checked and kept."))
    commands.add_parser(
        "config", help="print the configuration in force and where each value came from",
        description=(
            f"Print every setting as `key = value  # source`: the default, the file "
            f"({settings.CONFIG_FILE} in the working folder, or the path in "
            f"{settings.CONFIG_ENV}) or the environment variable "
            f"({settings.PREFIX}<KEY>), which wins over the file. The output is valid TOML: "
            "copy lines into the file to change them."))
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of at least 1")
    return value


def _corpus_parser(commands) -> None:
    corpus = commands.add_parser(
        "corpus", help="measure every head over a corpus: write a folder of Parquet files",
        description=(
            "Run the model over every passage of INPUT in padded batches sorted by length, "
            "measure every head of every passage with the app's own statistics and detectors, "
            "and write DIR: heads.parquet (each head's mean and standard deviation of every "
            "measure over the passages), passages.parquet (each passage's measures, per head), "
            "texts.parquet, head_distances.npy (Jensen-Shannon distances between heads), "
            "embedding/ (sampled queries and keys) and corpus.json (written last). INPUT is "
            "plain text (one passage per line, or passages separated by blank lines), CSV or "
            "JSONL with a 'text' column (and optionally 'text_pair'), or Parquet. An "
            "interrupted job started again with the same arguments resumes where it stopped. "
            "The Corpus page opens DIR."))
    corpus.add_argument("input", type=Path, metavar="INPUT",
                        help="the corpus: .txt, .csv, .jsonl or .parquet")
    corpus.add_argument("--model", default="encoder",
                        help="encoder (the embedded MiniLM, the default), decoder (the embedded "
                             "SmolLM2), KIND:NAME, a Hugging Face id or a local folder")
    corpus.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="the output folder (new or empty, or an unfinished job's)")
    corpus.add_argument("--engine", choices=ENGINES, default=None,
                        help="local: this process (the default); ray: Ray Data with an actor "
                             "pool (a local Ray unless --ray-address is given)")
    corpus.add_argument("--ray-address", default=None, metavar="ADDRESS",
                        help="join the Ray cluster at ADDRESS (host:port or ray://host:port); "
                             "implies --engine ray")
    corpus.add_argument("--actors", type=_positive, default=None,
                        help="Ray workers, each loading the model once (default: 2 on a local "
                             "Ray, else one per CPU of the cluster but one)")
    corpus.add_argument("--batch-size", type=_positive, default=CORPUS_BATCH_SIZE,
                        help=f"passages per batch, at most (default {CORPUS_BATCH_SIZE}; long "
                             "passages get smaller batches)")
    corpus.add_argument("--max-tokens", type=_positive, default=None,
                        help="cut each passage to N tokens (default: the model's own limit for "
                             "one input); longer passages are cut and counted")
    corpus.add_argument("--limit", type=_positive, default=None,
                        help="read only the first N passages")


PROGRESS_EVERY_S = 2.0  # seconds between two progress lines


def corpus_command(arguments: argparse.Namespace) -> None:
    from models.corpus.job import JobProgress, JobSettings, run_corpus

    engine = arguments.engine or (RAY if arguments.ray_address else LOCAL)
    if arguments.ray_address and engine != RAY:
        raise ValueError("--ray-address joins a Ray cluster: use it with --engine ray.")
    shown = {"at": 0.0}

    def progress(state: JobProgress) -> None:
        now = time.monotonic()
        if now - shown["at"] >= PROGRESS_EVERY_S or state.done == state.total:
            shown["at"] = now
            print(f"{PROGRAM}: {state.line()}", file=sys.stderr)

    settings = JobSettings(batch_size=arguments.batch_size, max_tokens=arguments.max_tokens,
                           limit=arguments.limit)
    summary = run_corpus(arguments.input, arguments.out, arguments.model, settings=settings,
                         engine=engine, ray_address=arguments.ray_address,
                         actors=arguments.actors, progress=progress)
    corpus = summary["corpus"]
    cut = (f"; {corpus['truncated_passages']:,} passages longer than {corpus['token_limit']} "
           "tokens were cut" if corpus["truncated_passages"] else "")
    print(f"{PROGRAM}: wrote {arguments.out}: {corpus['passages']:,} passages, "
          f"{corpus['tokens']:,} tokens, {summary['model']['layers']} layers x "
          f"{summary['model']['heads']} heads{cut}", file=sys.stderr)


def patch_command(arguments: argparse.Namespace) -> None:
    from models.experiments import contrast, patching

    loaded = arguments.model.load()
    given = contrast.experiment(loaded, arguments.clean, arguments.corrupted, arguments.answer,
                                arguments.wrong)
    grid = patching.patching_grid(loaded, given.pair, given.difference, arguments.site,
                                  arguments.layer)
    arguments.out.write_text(grid.csv_text(), encoding="utf-8")
    print(f"{PROGRAM}: wrote {grid.values.size} cells of {arguments.site} to {arguments.out} "
          f"(clean {grid.clean_metric:.4f}, corrupted {grid.corrupted_metric:.4f})",
          file=sys.stderr)


def _say(message: str) -> None:
    print(f"{PROGRAM}: {message}…", file=sys.stderr)


def export_command(arguments: argparse.Namespace) -> None:
    from cli import export

    written = export.run_export(export_request.request_of(arguments), arguments.out, _say)
    print(f"{PROGRAM}: wrote {arguments.out} ({written:,} bytes)", file=sys.stderr)


APP = Path(__file__).resolve().parents[1] / "app.py"  # beside the packages, in a checkout or a wheel
SERVER = APP.with_name("server.py")  # app.py on Streamlit's ASGI server (ui/serving.py)
# The app's Streamlit settings: cli/streamlit.toml is a link to .streamlit/config.toml, so the
# installed package carries them (Streamlit itself reads .streamlit/ only in the working folder).
STREAMLIT_SETTINGS = Path(__file__).resolve().parent / "streamlit.toml"


def _flags(table: dict, prefix: str = "") -> dict[str, str]:
    found = {}
    for key, value in table.items():
        if isinstance(value, dict):
            found.update(_flags(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = str(value).lower() if isinstance(value, bool) else str(value)
    return found


def streamlit_command(passed: list[str]) -> list[str]:
    """`streamlit run server.py` (app.py, see ui/serving.py; through ui/launch.py, offline) with
    the app's settings and limits, then `passed` (which wins)."""
    from ui.server_limits import OPTIONS

    with STREAMLIT_SETTINGS.open("rb") as handle:
        options = _flags(tomllib.load(handle))
    options.update({name: str(value) for name, value in OPTIONS.items()})
    named = {argument.split("=")[0].removeprefix("--") for argument in passed
             if argument.startswith("--")}
    ours = [f"--{name}={value}" for name, value in options.items() if name not in named]
    return [sys.executable, "-m", "ui.launch", "run", str(SERVER), *ours, *passed]


def serve_command(arguments: argparse.Namespace) -> None:
    for script in (APP, SERVER):
        if not script.is_file():
            raise ValueError(f"The app's script {script} is missing: reinstall "
                             "attention-explorer.")
    command = streamlit_command(arguments.streamlit_options)
    _say(f"starting Streamlit: {' '.join(command[2:])}")
    sys.stderr.flush()
    os.execv(command[0], command)  # Streamlit takes this process over (same PID, signals)


def prepare_command(arguments: argparse.Namespace) -> None:
    from models.prepare import prepare

    started = time.monotonic()
    built = prepare(lambda line: print(f"{PROGRAM}: {line}", file=sys.stderr, flush=True))
    print(f"{PROGRAM}: the cache holds everything the pages build on first open "
          f"({len(built)} built now in {time.monotonic() - started:.0f} s)", file=sys.stderr)


def _toml_value(value: object) -> str:
    return str(value) if isinstance(value, int) else '"' + str(value).replace('"', '\\"') + '"'


def config_command(arguments: argparse.Namespace) -> None:
    values = settings.effective()
    width = max(len(f"{value.name.lower()} = {_toml_value(value.value)}") for value in values)
    for value in values:
        line = f"{value.name.lower()} = {_toml_value(value.value)}"
        print(f"{line:<{width}}  # {value.source}")


ENGINE_COMMANDS = ("patch", "corpus", "export", "prepare")  # the ones that load a model
COMMANDS = {"patch": patch_command, "corpus": corpus_command, "export": export_command,
            "serve": serve_command, "prepare": prepare_command, "config": config_command}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    arguments, rest = parser.parse_known_args(argv)
    if rest and arguments.command != "serve":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    arguments.streamlit_options = rest
    if arguments.command in ENGINE_COMMANDS:
        # tqdm bars drawn by libraries (transformers' GGUF conversion calls tqdm itself): the
        # commands say their own progress in lines; tqdm reads this once, when imported
        os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        settings.check()
        if arguments.command in ENGINE_COMMANDS:
            configure_threads()  # before torch loads: OpenMP reads its wait policy once
            from transformers.utils import logging as progress_bars

            progress_bars.disable_progress_bar()  # transformers' bar as weights load: noise here
        COMMANDS[arguments.command](arguments)
    except BrokenPipeError:  # the output's reader stopped early (`| head`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (ValueError, ModelLoadError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # the last guard: one line, never a trace
        print(f"{PROGRAM}: error: {type(error).__name__}: {' '.join(str(error).split())}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
