"""One forward pass that reads and edits named hook points (models/hooks/points.py).

A `Run` says which points to keep (`cache`), which to edit (`edits`: a function that gets the
value and returns its replacement, or None to leave it), where to stop (`stop_at`), and how the
layer stack runs (`plan`, for long inputs: skip the layers before one, run some layers' attention
fused, compute one layer's attention for some heads or rows only). `run_model(model, inputs,
run)` runs one forward with it. TransformerLens' `run_with_cache` and `run_with_hooks` are the
model: caching, streaming a long input layer by layer, ablation, knockout, patching and the
layer walk are all runs with different points and edits.

The hooks that call into a run are installed once, when a model is loaded (models/hooks/
install.py), before any session uses it; they find the run of the forward that calls them in a
context variable, set only while `run_model` runs. Two sessions running different edits on the
same shared model at the same moment therefore each see only their own run: nothing global
about the model changes while it runs.

Dimensions: B batch, T tokens, D model width.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from models.hooks import points

Edit = Callable[[torch.Tensor, str], torch.Tensor | None]
_ACTIVE: ContextVar[Run | None] = ContextVar("attention_explorer_run", default=None)


class Stopped(Exception):
    """Raised inside a forward once its run's `stop_at` point has been visited."""


@dataclass(frozen=True)
class LayerPlan:
    """How one stack of layers runs (all defaults: the whole forward, as the model does it).

    start: the layers before it are skipped (each hands its input on unchanged), and with
        `start_input` (B, T, D) layer `start` reads that instead: a layer computed again from
        its kept input costs that layer alone.
    fused_until: the layers before it run the model's fused attention (no weights exist, so
        none can be read): the cheapest way to the input of a late layer.
    heads_of: in layer `focus`, compute only the query heads that share this head's keys and
        values (one head without grouped-query attention).
    rows: in layer `focus`, compute the attention of these query positions only.
    focus: the layer `heads_of` and `rows` apply to; its attention's output no longer fits the
        residual stream, so the run must stop at that layer's attention (`stop_at`).
    stack: the stack the plan applies to ("" for a model with one stack).
    """

    start: int = 0
    start_input: torch.Tensor | None = None
    fused_until: int = 0
    heads_of: int | None = None
    rows: slice | None = None
    focus: int | None = None
    stack: str = ""

    def __post_init__(self) -> None:
        if self.start < 0 or self.fused_until < 0:
            raise ValueError("a layer plan's layers are counted from 0")
        if (self.heads_of is not None or self.rows is not None) and self.focus is None:
            raise ValueError("heads_of and rows need the layer they apply to (focus)")


class Run:
    """What one forward reads and edits.

    cache: the names of the points to keep; `run.cache[name]` holds each after the forward
        (detached, unless `grad`). A callable `cache(name) -> bool` chooses by name.
    edits: point name -> one function or a list of them, each called as `edit(value, name)`
        and returning the value to use instead, or None to keep it. An edit that only reads
        (returns None) is how a long input's maps are reduced layer by layer and let go.
    stop_at: the forward ends once this point has been visited (its cache and edits done).
    plan: how the layer stack runs (LayerPlan).
    grad: run with autograd on, and keep cached values in the graph, so a metric computed
        from the output can be differentiated with respect to them (attribution patching).
    """

    def __init__(self, cache: Iterable[str] | Callable[[str], bool] = (),
                 edits: Mapping[str, Edit | Sequence[Edit]] | None = None,
                 stop_at: str | None = None, plan: LayerPlan | None = None,
                 grad: bool = False):
        self._keep = cache if callable(cache) else frozenset(cache).__contains__
        self._edits: dict[str, tuple[Edit, ...]] = {
            name: tuple(functions) if isinstance(functions, Sequence) else (functions,)
            for name, functions in (edits or {}).items()}
        self.plan = plan or LayerPlan()
        if self.plan.start_input is not None:
            start = points.resid_pre(self.plan.start, self.plan.stack)
            given = self.plan.start_input
            self._edits[start] = (lambda value, name: given.to(value.dtype),
                                  *self._edits.get(start, ()))
        self.stop_at = stop_at
        self.grad = grad
        self.cache: dict[str, torch.Tensor] = {}
        self.scalings: dict[str, float] = {}  # attention module prefix -> what q.k was scaled by
        self.seen: list[str] = []  # every point visited, in order
        self._residuals: dict[str, torch.Tensor] = {}  # for resid_mid edits in pre-norm layers

    def wants(self, name: str) -> bool:
        """Whether the point matters to this run (kept, edited or where it stops): computing a
        point that is not wanted (the scores) is skipped."""
        return name in self._edits or name == self.stop_at or self._keep(name)

    def edits(self, name: str) -> bool:
        return name in self._edits

    def visit(self, name: str, value: torch.Tensor) -> torch.Tensor:
        """The value the forward goes on with at point `name`: edited, kept, maybe the end."""
        self.seen.append(name)
        for edit in self._edits.get(name, ()):
            replaced = edit(value, name)
            if replaced is not None:
                if replaced.shape != value.shape:
                    raise ValueError(f"an edit of {name} returned shape {tuple(replaced.shape)} "
                                     f"for a value of shape {tuple(value.shape)}")
                value = replaced
        if self._keep(name):
            if self.grad and not value.requires_grad and value.is_floating_point():
                # nothing before this point needs a gradient (frozen weights): the forward goes
                # on from here as a leaf, so the metric can still be differentiated by it
                value = value.detach().requires_grad_(True)
            self.cache[name] = value if self.grad else value.detach()
        if name == self.stop_at:
            raise Stopped
        return value

    def remember_residual(self, name: str, value: torch.Tensor) -> None:
        """Keep a layer's input while the layer runs (a pre-norm resid_mid edit needs it)."""
        self._residuals[name] = value

    def residual(self, name: str) -> torch.Tensor | None:
        return self._residuals.get(name)

    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self.cache[name]
        except KeyError:
            raise KeyError(f"{name} was not cached by this run (cached: "
                           f"{', '.join(sorted(self.cache)) or 'nothing'})") from None


def active() -> Run | None:
    """The run of the forward executing in this context, if any."""
    return _ACTIVE.get()


def planned_start(stack: str = "") -> int:
    """The first layer of `stack` the active run's plan runs (0 without a run or a plan for
    that stack): a from-scratch model's layers before it hand their input on."""
    run = _ACTIVE.get()
    return run.plan.start if run is not None and run.plan.stack == stack else 0


@contextmanager
def running(run: Run):
    """Make `run` the active run of this context for the block (one at a time)."""
    if _ACTIVE.get() is not None:
        raise RuntimeError("a run is already active in this thread: runs do not nest")
    token = _ACTIVE.set(run)
    try:
        yield run
    finally:
        _ACTIVE.reset(token)


def run_model(model: torch.nn.Module, inputs: Mapping[str, object], run: Run):
    """One forward of `model(**inputs)` with `run` active. Returns the model's output, or None
    when the run stopped early (at `stop_at`). The model must have been installed
    (models.hooks.install) or be one of the from-scratch models, which carry their hook points."""
    if not getattr(model, "_explorer_hooked", False):
        raise RuntimeError(f"{type(model).__name__} has no hook points: load it through the "
                           "app's loaders (or call models.hooks.install.install) first")
    grad = torch.enable_grad() if run.grad else torch.inference_mode()
    with running(run), grad:
        try:
            return model(**inputs)
        except Stopped:
            return None


def hook(name: str, value: torch.Tensor) -> torch.Tensor:
    """A hook point inside a model's own code: the active run's value for `name` (the value
    itself when no run is active). The from-scratch models call this at each of their points."""
    run = _ACTIVE.get()
    return value if run is None else run.visit(name, value)



def note_scaling(prefix: str, scaling: float) -> None:
    """Tell the active run what an attention module multiplies q.k by (the trace keeps it)."""
    run = _ACTIVE.get()
    if run is not None:
        run.scalings[prefix] = float(scaling)
