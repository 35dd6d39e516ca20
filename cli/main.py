"""`attention-explorer`: the app's computations without the browser.

    attention-explorer patch --model decoder --clean TEXT --corrupted TEXT --answer TOKEN \
        --wrong TOKEN --site resid_pre --out FILE.csv

Each subcommand parses its arguments, calls the engine (models/) and writes the result: the
same functions the pages call. A user's mistake ends with one sentence on stderr and exit
status 1, never a stack trace.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformers.utils import logging as progress_bars

from models.errors import ModelLoadError
from models.experiments import contrast, patching
from models.loading import kinds
from models.loading.kinds import DECODER, PRETRAINED
from models.loading.source import ModelSource

PROGRAM = "attention-explorer"


def model_source(text: str) -> ModelSource:
    """`decoder`, `pretrained`, or either followed by `:NAME` (a Hugging Face id or a folder),
    as the app's links write the model."""
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
    patch.add_argument("--model", type=model_source, default=ModelSource.default(DECODER),
                       help="decoder (the embedded SmolLM2, the default), pretrained, or "
                            "decoder:NAME / pretrained:NAME")
    patch.add_argument("--clean", required=True, help="the clean prompt")
    patch.add_argument("--corrupted", required=True,
                       help="the corrupted prompt (as many tokens as the clean one)")
    patch.add_argument("--answer", required=True, help="the clean prompt's answer (one token)")
    patch.add_argument("--wrong", required=True, help="the wrong token (one token)")
    patch.add_argument("--site", choices=patching.SITES, default=patching.RESID_PRE,
                       help="what one cell patches (default: resid_pre)")
    patch.add_argument("--layer", type=int, default=None,
                       help="the layer of the head_position site")
    patch.add_argument("--out", required=True, type=Path, help="the CSV file to write")
    return parser


def patch_command(arguments: argparse.Namespace) -> None:
    loaded = arguments.model.load()
    given = contrast.experiment(loaded, arguments.clean, arguments.corrupted, arguments.answer,
                                arguments.wrong)
    grid = patching.patching_grid(loaded, given.pair, given.difference, arguments.site,
                                  arguments.layer)
    arguments.out.write_text(grid.csv_text(), encoding="utf-8")
    print(f"{PROGRAM}: wrote {grid.values.size} cells of {arguments.site} to {arguments.out} "
          f"(clean {grid.clean_metric:.4f}, corrupted {grid.corrupted_metric:.4f})",
          file=sys.stderr)


COMMANDS = {"patch": patch_command}


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    progress_bars.disable_progress_bar()  # transformers' bar while weights load: noise here
    try:
        COMMANDS[arguments.command](arguments)
    except (ValueError, ModelLoadError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
