"""The names of the hook points every model exposes, after TransformerLens' naming.

A hook point is a place in the forward pass where one tensor can be read (cached) or replaced
(edited). Every model kind names its points the same way, so an analysis written against these
names runs on the from-scratch encoder, a Hugging Face BERT, a causal decoder and either stack of
an encoder-decoder alike:

    hook_embed                      (B, T, D)  the residual stream entering layer 0
    hook_token_embed, hook_pos_embed, hook_segment_embed
                                    (B, T, D)  the parts summed into it, where the model has them
    blocks.{l}.hook_resid_pre       (B, T, D)  the residual stream entering layer l
    blocks.{l}.ln1.hook_normalized  (B, T, D)  what attention reads, in a pre-norm layer
    blocks.{l}.attn.hook_q          (B, H, T, Dh)   queries (after the rotary rotation, if any)
    blocks.{l}.attn.hook_k          (B, Hkv, T, Dh) keys (Hkv < H with grouped-query attention)
    blocks.{l}.attn.hook_v          (B, Hkv, T, Dh) values
    blocks.{l}.attn.hook_scores     (B, H, Q, K)    q.k times the scaling, plus the model's mask
    blocks.{l}.attn.hook_pattern    (B, H, Q, K)    the softmax of the scores: the attention map
    blocks.{l}.attn.hook_z          (B, T, H, Dh)   each head's output before W_O
    blocks.{l}.hook_attn_out        (B, T, D)  the attention sublayer's output (after W_O)
    blocks.{l}.hook_resid_mid       (B, T, D)  the residual stream between the two sublayers
    blocks.{l}.ln2.hook_normalized  (B, T, D)  what the MLP reads, in a pre-norm layer
    blocks.{l}.mlp.hook_pre         (B, T, F)  the MLP's hidden layer before its activation
    blocks.{l}.mlp.hook_post        (B, T, F)  ... and after it (what the down-projection reads)
    blocks.{l}.hook_mlp_out         (B, T, D)  the MLP sublayer's output
    blocks.{l}.hook_resid_post      (B, T, D)  the residual stream leaving layer l
    ln_final.hook_normalized        (B, T, D)  what the unembedding reads (the last residual
                                               stream itself where there is no final norm)
    hook_logits                     (B, T, V)  the language-model head's output

An encoder-decoder prefixes the names of each stack, `encoder.` and `decoder.`, and its decoder
layers add `blocks.{l}.cross_attn.hook_*` beside `attn`. Which points a loaded model has is
`models.hooks.install.point_names(model)`; asking for one it does not have raises a ValueError
that names the model.

Dimension letters: B batch, T tokens, Q/K query/key positions, H heads, Hkv key/value heads,
D model width, Dh head width, F MLP width, V vocabulary, L layers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EMBED = "hook_embed"
TOKEN_EMBED = "hook_token_embed"
POS_EMBED = "hook_pos_embed"
SEGMENT_EMBED = "hook_segment_embed"
FINAL = "ln_final.hook_normalized"
LOGITS = "hook_logits"

# The points inside one attention module, and the ones around a layer's sublayers.
ATTENTION_POINTS = ("q", "k", "v", "scores", "pattern", "z")
LAYER_POINTS = ("resid_pre", "ln1", "attn_out", "resid_mid", "ln2", "mlp_pre", "mlp_post",
                "mlp_out", "resid_post")
_LAYER_NAMES = {"resid_pre": "hook_resid_pre", "ln1": "ln1.hook_normalized",
                "attn_out": "hook_attn_out", "resid_mid": "hook_resid_mid",
                "ln2": "ln2.hook_normalized", "mlp_pre": "mlp.hook_pre",
                "mlp_post": "mlp.hook_post", "mlp_out": "hook_mlp_out",
                "resid_post": "hook_resid_post"}
_POINT = re.compile(r"^(?:(?P<stack>encoder|decoder)\.)?blocks\.(?P<layer>\d+)\."
                    r"(?:(?P<module>attn|cross_attn)\.hook_(?P<inner>q|k|v|scores|pattern|z)"
                    r"|(?P<rest>hook_resid_pre|ln1\.hook_normalized|hook_attn_out|hook_resid_mid"
                    r"|ln2\.hook_normalized|mlp\.hook_pre|mlp\.hook_post|hook_mlp_out"
                    r"|hook_resid_post))$")
_BY_NAME = {name: kind for kind, name in _LAYER_NAMES.items()}


@dataclass(frozen=True)
class Point:
    """One point of one layer, parsed: `kind` is one of ATTENTION_POINTS (with `module` "attn"
    or "cross_attn") or LAYER_POINTS; `stack` is "" for a single-stack model."""

    stack: str
    layer: int
    kind: str
    module: str = ""

    @property
    def name(self) -> str:
        prefix = f"{self.stack}." if self.stack else ""
        if self.module:
            return f"{prefix}blocks.{self.layer}.{self.module}.hook_{self.kind}"
        return f"{prefix}blocks.{self.layer}.{_LAYER_NAMES[self.kind]}"


def parse(name: str) -> Point | None:
    """The layer point a name stands for; None for a model-wide point (embeddings, final norm,
    logits) or a name that is not a point."""
    match = _POINT.match(name)
    if match is None:
        return None
    if match["inner"]:
        return Point(match["stack"] or "", int(match["layer"]), match["inner"], match["module"])
    return Point(match["stack"] or "", int(match["layer"]), _BY_NAME[match["rest"]])


def _prefixed(stack: str, name: str) -> str:
    return f"{stack}.{name}" if stack else name


def resid_pre(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "resid_pre").name


def resid_mid(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "resid_mid").name


def resid_post(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "resid_post").name


def attn_out(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "attn_out").name


def mlp_out(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "mlp_out").name


def mlp_pre(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "mlp_pre").name


def mlp_post(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "mlp_post").name


def ln1(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "ln1").name


def ln2(layer: int, stack: str = "") -> str:
    return Point(stack, layer, "ln2").name


def q(layer: int, stack: str = "", module: str = "attn") -> str:
    return Point(stack, layer, "q", module).name


def k(layer: int, stack: str = "", module: str = "attn") -> str:
    return Point(stack, layer, "k", module).name


def v(layer: int, stack: str = "", module: str = "attn") -> str:
    return Point(stack, layer, "v", module).name


def scores(layer: int, stack: str = "", module: str = "attn") -> str:
    return Point(stack, layer, "scores", module).name


def pattern(layer: int, stack: str = "", module: str = "attn") -> str:
    return Point(stack, layer, "pattern", module).name


def z(layer: int, stack: str = "", module: str = "attn") -> str:
    return Point(stack, layer, "z", module).name


def embed(stack: str = "") -> str:
    return _prefixed(stack, EMBED)


def every_layer(kind: str, num_layers: int, stack: str = "", module: str = "") -> tuple[str, ...]:
    """The names of one kind of point in every layer: `every_layer("pattern", 6)`."""
    if kind in ATTENTION_POINTS:
        return tuple(Point(stack, layer, kind, module or "attn").name for layer in range(num_layers))
    if kind not in LAYER_POINTS:
        raise ValueError(f"'{kind}' is not a kind of point; known: "
                         f"{', '.join(ATTENTION_POINTS + LAYER_POINTS)}")
    return tuple(Point(stack, layer, kind).name for layer in range(num_layers))
