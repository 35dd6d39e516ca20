"""Activation patching: the corrupted prompt run again with one piece of the clean run put back.

Two prompts with the same number of tokens (models/experiments/contrast.py) differ in what the
model should answer: "When Mary and John went to the store, John gave a drink to" (" Mary") and
the same with a third name ("..., Paul gave a drink to"). Patching runs the corrupted prompt
and puts one piece of the clean run's activations (a cell) in its place; if the logit difference
comes back, that piece carries what the clean prompt adds (Wang et al. 2022; Meng et al. 2022;
Heimersheim & Nanda 2024). Normalised, the corrupted run is 0 and the clean run 1.

Sites, what one cell of each grid patches:

    resid_pre       the residual stream entering a layer, at one position        (L, T)
    attn_out        the attention sublayer's output, at one position             (L, T)
    mlp_out         the MLP sublayer's output, at one position                   (L, T)
    head            one head's output (hook_z, before W_O), every position       (L, H)
    head_position   one head's output at one position, in one chosen layer       (H, T)
    head_pattern    one head: the clean run's attention pattern, its own values  (L, H)
    head_values     one head: its own attention pattern, the clean run's values  (L, H)

A head's output is its pattern times its values (z_h = A_h V_h), so the last two put in
A_clean V_corrupted and A_corrupted V_clean: what the head would output had only its pattern,
or only its values, come from the clean prompt.

Batched: each forward carries up to B patched copies of the corrupted prompt, item b with its
own cell patched (one edit per layer patches the items whose cell lies in it). The layers before
a batch's first cell compute exactly what the corrupted run computed, so the batch starts at
that layer from the corrupted run's kept input (models.hooks.run.LayerPlan).

Dimensions: B batch, L layers, T tokens, H heads, Hkv key/value heads, Dh head width, D model
width, F MLP width, V vocabulary, N cells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from models.experiments.contrast import LogitDifference, PromptPair, token_texts
from models.experiments.patching_cost import config_size, grid_cost
from models.experiments.patching_grid import Baseline, Cell, PatchingGrid
from models.experiments.sites import (ATTN_OUT, HEAD, HEAD_PATTERN, HEAD_POSITION,  # noqa: F401
                                      HEAD_SITES, HEAD_VALUES, MLP_OUT, POSITION_SITES,
                                      RESID_PRE, SITES)
from models.hooks import points
from models.hooks.attention import repeat_kv
from models.hooks.capture import num_layers
from models.hooks.edits import replace_point
from models.hooks.install import point_names
from models.hooks.run import LayerPlan, Run, run_model
from models.loading.loader_checks import HEAD_KEYS

# Two logit differences closer than this are the same: nothing for patching to bring back.
SAME_METRIC = 1e-4
Progress = Callable[[int, int], None]  # (cells done, cells in all)


# --- which points a site patches ------------------------------------------------------------

def site_point(site: str, layer: int) -> str:
    """The hook point one layer's cells of `site` are patched at."""
    if site in POSITION_SITES:
        return points.Point("", layer, site).name
    if site in (*HEAD_SITES, HEAD_POSITION):
        return points.z(layer)
    raise ValueError(f"The site '{site}' is not a patching site; choose one of "
                     f"{', '.join(SITES)}.")


def _cached_points(site: str, layers: int, layer: int | None) -> list[str]:
    """The points the baseline runs keep for `site`: every layer's input (where batches start)
    and the patched points, or a head's pattern and values."""
    chosen = [layer] if site == HEAD_POSITION else range(layers)
    names = [points.resid_pre(index) for index in range(layers)]
    if site in (HEAD_PATTERN, HEAD_VALUES):
        names += [name for index in chosen
                  for name in (points.pattern(index), points.v(index))]
    elif site != RESID_PRE:
        names += [site_point(site, index) for index in chosen]
    return names


def check_site(loaded, site: str, layer: int | None = None) -> None:
    """Refuse a site the model has no point for, or a layer it does not have."""
    if site not in SITES:
        raise ValueError(f"The site '{site}' is not a patching site; choose one of "
                         f"{', '.join(SITES)}.")
    layers = num_layers(loaded.model)
    if site == HEAD_POSITION and (layer is None or not 0 <= layer < layers):
        raise ValueError(f"Choose a layer between 0 and {layers - 1} for the heads by position.")
    if site_point(site, 0) not in set(point_names(loaded.model)):
        raise ValueError(f"{loaded.label} has no {site} point (the app does not know where its "
                         "layers compute it), so this grid cannot be drawn here; the residual "
                         "stream and the heads can.")


# --- the two runs patched between ------------------------------------------------------------

def metric_run(loaded, given, difference: LogitDifference, names: Sequence[str]
               ) -> tuple[dict[str, torch.Tensor], float]:
    """One forward of a prompt: the points `names` (batch dimension dropped) and its metric."""
    run = Run(cache=names)
    output = run_model(loaded.model, given.batched(loaded.model, 1, last_only=loaded.causal), run)
    values = {name: value[0] for name, value in run.cache.items()}
    return values, float(difference.of(output.logits)[0])


def baseline(loaded, pair: PromptPair, difference: LogitDifference,
             names: Sequence[str] = ()) -> Baseline:
    """The clean and the corrupted run, keeping `names`; refused when their logit
    differences are the same (there is nothing to bring back)."""
    clean, clean_metric = metric_run(loaded, pair.clean, difference, names)
    corrupted, corrupted_metric = metric_run(loaded, pair.corrupted, difference, names)
    return checked_baseline(clean, corrupted, clean_metric, corrupted_metric)


def checked_baseline(clean: dict[str, torch.Tensor], corrupted: dict[str, torch.Tensor],
                     clean_metric: float, corrupted_metric: float) -> Baseline:
    """The two runs as a Baseline, refused when their logit differences are the same."""
    if abs(clean_metric - corrupted_metric) < SAME_METRIC:
        raise ValueError(
            f"The clean and the corrupted prompt give the same logit difference "
            f"({clean_metric:.4g}): there is nothing for patching to bring back, so choose a "
            "corrupted prompt that changes which of the two tokens the model prefers.")
    return Baseline(clean, corrupted, clean_metric, corrupted_metric)


def _head_sources(site: str, base: Baseline, layers: Sequence[int]) -> dict[int, torch.Tensor]:
    """(T, H, Dh) per layer: what each head outputs when patched at `site`."""
    sources = {}
    for layer in layers:
        if site in (HEAD, HEAD_POSITION):
            sources[layer] = base.clean[points.z(layer)]
            continue
        pattern_from = base.clean if site == HEAD_PATTERN else base.corrupted
        values_from = base.corrupted if site == HEAD_PATTERN else base.clean
        pattern = pattern_from[points.pattern(layer)]  # (H, Q, K)
        values = values_from[points.v(layer)]  # (Hkv, K, Dh)
        values = repeat_kv(values[None], pattern.size(0) // values.size(0))[0]  # (H, K, Dh)
        outputs = torch.matmul(pattern.to(values.dtype), values)  # (H, T, Dh)
        sources[layer] = outputs.transpose(0, 1)  # (T, H, Dh)
    return sources


# --- the grid ---------------------------------------------------------------------------------

def cells_of(site: str, layers: int, tokens: int, heads: int, layer: int | None = None
             ) -> list[Cell]:
    """Every cell of a site's grid, layer by layer (the order the batches run in)."""
    if site in POSITION_SITES:
        return [Cell(index, position=p) for index in range(layers) for p in range(tokens)]
    if site == HEAD_POSITION:
        return [Cell(layer, position=p, head=h) for h in range(heads) for p in range(tokens)]
    return [Cell(index, head=h) for index in range(layers) for h in range(heads)]


def _puts_back_the_same(site: str, cell: Cell, sources: dict[int, torch.Tensor],
                        base: Baseline) -> bool:
    """Whether patching `cell` would put back exactly the value the corrupted run computed there,
    so that the patched run is the corrupted run and needs no forward: in a causal model the
    positions before the first token where the prompts differ are the same in both runs, at
    every layer (the sites that patch the residual stream, a sublayer's output or a head's
    output compare the two runs' kept values; the pattern and value sites are always run)."""
    if site in POSITION_SITES:
        corrupted = base.corrupted[site_point(site, cell.layer)]
    elif site in (HEAD, HEAD_POSITION):
        corrupted = base.corrupted[points.z(cell.layer)]
    else:
        return False
    clean = sources[cell.layer]
    if cell.head is not None:  # (T, H, Dh): one head's output
        clean, corrupted = clean[:, cell.head], corrupted[:, cell.head]
    if cell.position is not None:
        clean, corrupted = clean[cell.position], corrupted[cell.position]
    return torch.equal(clean.to(corrupted.dtype), corrupted)


def _patching_edit(items: list[int], chosen: list[Cell], source: torch.Tensor):
    """An edit that gives batch item items[i] the source's value at chosen[i]'s position and/or
    head: source (T, D) for a point of the stream, (T, H, Dh) for hook_z."""
    rows = torch.tensor(items)  # (n,)
    positions = None if chosen[0].position is None else torch.tensor([c.position for c in chosen])
    heads = None if chosen[0].head is None else torch.tensor([c.head for c in chosen])

    def edit(value: torch.Tensor, name: str) -> torch.Tensor:
        patched = value.clone()
        given = source.to(value.dtype)
        if heads is None:
            patched[rows, positions] = given[positions]  # (n, D)
        elif positions is None:
            patched[rows, :, heads] = given[:, heads].transpose(0, 1)  # (n, T, Dh)
        else:
            patched[rows, positions, heads] = given[positions, heads]  # (n, Dh)
        return patched
    return edit


def _run_batch(loaded, pair: PromptPair, difference: LogitDifference, site: str, base: Baseline,
               sources: dict[int, torch.Tensor], batch: list[Cell]) -> torch.Tensor:
    """(n,) the logit difference of each patched copy in one forward."""
    first = min(cell.layer for cell in batch)
    edits: dict[str, list] = {}
    for layer in sorted({cell.layer for cell in batch}):
        members = [(item, cell) for item, cell in enumerate(batch) if cell.layer == layer]
        edits[site_point(site, layer)] = [_patching_edit(
            [item for item, _ in members], [cell for _, cell in members], sources[layer])]
    start_input = base.corrupted[points.resid_pre(first)]  # (T, D)
    plan = LayerPlan(start=first,
                     start_input=start_input.expand(len(batch), *start_input.shape).contiguous())
    inputs = pair.corrupted.batched(loaded.model, len(batch), last_only=loaded.causal)
    output = run_model(loaded.model, inputs, Run(edits=edits, plan=plan))
    return difference.of(output.logits)  # (n,)


def patching_grid(loaded, pair: PromptPair, difference: LogitDifference, site: str,
                  layer: int | None = None, batch_size: int | None = None,
                  progress: Progress | None = None) -> PatchingGrid:
    """Patch every cell of `site` from the clean run into the corrupted one, `batch_size` cells
    per forward (default: as many as models.limits.PATCH_BATCH_BYTES allows); `progress(done,
    total)` hears each batch. `layer` is head_position's layer."""
    check_site(loaded, site, layer)
    if batch_size is not None and batch_size < 1:
        raise ValueError("The batch size must be at least 1.")
    layers = num_layers(loaded.model)
    heads = config_size(loaded.model.config, HEAD_KEYS) or 1
    cells = cells_of(site, layers, pair.num_tokens, heads, layer)
    cost = grid_cost(loaded, pair, len(cells))
    base = baseline(loaded, pair, difference, _cached_points(site, layers, layer))
    if site in POSITION_SITES:
        sources = {index: base.clean[site_point(site, index)] for index in range(layers)}
    else:
        sources = _head_sources(site, base, sorted({cell.layer for cell in cells}))
    size = batch_size or cost.batch
    # a cell that puts back what the corrupted run has there leaves the corrupted run as it is
    raw = torch.full((len(cells),), base.corrupted_metric, dtype=torch.float64)
    changed = [index for index, cell in enumerate(cells)
               if not _puts_back_the_same(site, cell, sources, base)]
    forwards = 0
    for start in range(0, len(changed), size):
        chosen = changed[start:start + size]
        raw[chosen] = _run_batch(loaded, pair, difference, site, base, sources,
                                 [cells[index] for index in chosen])
        forwards += 1
        if progress is not None:
            progress(len(cells) - len(changed) + start + len(chosen), len(cells))
    rows = heads if site == HEAD_POSITION else layers
    return PatchingGrid(site, layer if site == HEAD_POSITION else None,
                        raw.view(rows, -1).numpy(), base.clean_metric, base.corrupted_metric,
                        pair.clean.tokens, token_texts(loaded, pair.clean), difference, forwards)


def patched_difference(loaded, pair: PromptPair, difference: LogitDifference, point: str,
                       positions: Sequence[int] | None = None,
                       heads: Sequence[int] | None = None) -> float:
    """One forward of the corrupted prompt with the clean run's value of `point` put back at
    `positions` (None: all) and, for a hook_z point, `heads` only: the raw logit difference.
    The grid's cells, one at a time."""
    if point not in set(point_names(loaded.model)):
        raise ValueError(f"{loaded.label} has no hook point '{point}'.")
    clean, _ = metric_run(loaded, pair.clean, difference, [point])
    edits = replace_point(point, clean[point][None], positions, heads)
    inputs = pair.corrupted.batched(loaded.model, 1, last_only=loaded.causal)
    output = run_model(loaded.model, inputs, Run(edits=edits))
    return float(difference.of(output.logits)[0])
