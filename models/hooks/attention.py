"""The attention function every Hugging Face model here runs: the model's own eager attention,
with the run's attention points (q, k, v, scores, pattern, z) read and edited around it.

Models built on transformers' attention interface (BERT, RoBERTa, DistilBERT, GPT-2, Llama,
T5, BART, ...) call `ALL_ATTENTION_FUNCTIONS[config._attn_implementation]` inside each attention
module. `models.hooks.install` switches a loaded model to `attention_with_hooks`, which calls the
module's own `eager_attention_forward` (so the numbers are the model's, bit for bit) and, while
a run is active (models/hooks/run.py), visits the module's points. With no run it is plain eager
attention.

In a run, the attention of the model families in LEAN_FAMILIES is computed by `lean_eager`: the
same operations on the same values as the family's eager function, in place where eager makes a
new (H, Q, K) tensor for each step, so one tensor of weights is allocated a layer instead of four
(bit for bit the same numbers: tests/hooks/test_lean_attention.py). At 2,048 tokens on SmolLM2
a layer's attention took 250 ms against 160 ms on one thread, most of the difference the kernel
zeroing the pages of each new 150 MB tensor. Outside a run (a bare forward) the model's own
eager function runs, as it is.

Edits of the scores are handed to the eager function as a changed additive mask (the entries no
edit changed keep the model's own mask, so they stay bit for bit); an edited pattern is
multiplied with the values again, as eager attention does.

Dimensions: B batch, H query heads, Hkv key/value heads, Q/K query/key positions, Dh head width.
"""

from __future__ import annotations

import sys

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from models.hooks.run import Run, active

ATTENTION_NAME = "attention_explorer"
WHERE = "_explorer_attention"  # set on each attention module by install(): (stack, layer, module)


# The modules whose eager_attention_forward `lean_eager` reproduces: scores = q.k * scaling
# (keys and values repeated for grouped query heads), plus the additive mask, softmax over the keys
# (in float32, cast back to the query's dtype), dropout, times the values.
LEAN_FAMILIES = frozenset({"transformers.models.llama.modeling_llama",
                           "transformers.models.bert.modeling_bert"})


def _eager_function(module: nn.Module):
    return sys.modules[type(module).__module__].eager_attention_forward


def repeat_kv(states: torch.Tensor, group: int) -> torch.Tensor:
    """(B, Hkv, T, Dh) -> (B, Hkv * group, T, Dh): each key/value head for the query heads
    that share it."""
    return states if group == 1 else states.repeat_interleave(group, dim=1)


def attention_scores(query: torch.Tensor, key: torch.Tensor, scaling: float) -> torch.Tensor:
    """(B, H, Q, K) q.k times the scaling, as eager attention computes it (scaled in place: the
    same numbers as `* scaling`, one tensor; the product's gradient needs q and k, not itself)."""
    key = repeat_kv(key, query.size(1) // key.size(1))  # (B, H, K, Dh)
    return torch.matmul(query, key.transpose(2, 3)).mul_(scaling)  # (B, H, Q, K)


def lean_eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """The eager attention of a LEAN_FAMILIES module, its (B, H, Q, K) steps done in place in one
    tensor: (B, Q, H, Dh) context and (B, H, Q, K) weights, bit for bit the family's own. Falls
    back to the family's function where in place cannot give the same (another dtype, gradients,
    active dropout, a mask that widens the scores)."""
    eager = _eager_function(module)
    batch, heads, queries = query.shape[:3]
    shape = (batch, heads, queries, key.size(-2))
    if (type(module).__module__ not in LEAN_FAMILIES or query.dtype != torch.float32
            or (dropout and module.training)
            or (torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)))
            or (attention_mask is not None and (attention_mask.dtype != query.dtype or
                torch.broadcast_shapes(shape, attention_mask.shape) != shape))):
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                     **kwargs)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    weights = attention_scores(query, key, scaling)  # (B, H, Q, K), one new tensor
    if attention_mask is not None:
        weights.add_(attention_mask)
    torch._softmax(weights, -1, False, out=weights)  # softmax's own kernel, written in place
    context = torch.matmul(weights, repeat_kv(value, heads // value.size(1)))  # (B, H, Q, Dh)
    return context.transpose(1, 2).contiguous(), weights


def _additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)


def _visit_scores(run: Run, name: str, query, key, mask, scaling: float, bias):
    """Visit the scores; returns the mask that makes eager attention compute the edited ones."""
    plain = attention_scores(query, key, scaling)  # (B, H, Q, K)
    if bias is not None:
        plain = plain + bias
    mask = _additive(mask, plain.dtype)
    full = plain if mask is None else plain + mask
    edited = run.visit(name, full)
    if edited is full:
        return mask
    changed = edited - plain
    if mask is None:
        return changed.clamp(min=torch.finfo(plain.dtype).min)
    kept = torch.where(edited == full, mask.expand_as(full), changed)
    return kept.clamp(min=torch.finfo(plain.dtype).min)


def attention_with_hooks(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                         **kwargs):
    """The module's eager attention, its points visited by the active run (see module doc)."""
    eager = _eager_function(module)
    run = active()
    where = module.__dict__.get(WHERE)
    if run is None or where is None:
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                     **kwargs)
    stack, layer, kind = where
    plan = run.plan
    planned = stack == plan.stack
    if planned and layer < plan.start:  # a skipped layer run for what it hands on (T5)
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                     **kwargs)
    if planned and layer < plan.fused_until:  # a layer before the one asked for: no weights
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      scaling=scaling, dropout=dropout, **kwargs)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    prefix = f"{stack}.blocks.{layer}.{kind}" if stack else f"blocks.{layer}.{kind}"
    run.scalings[prefix] = float(scaling)
    if planned and layer == plan.focus:
        query, key, value, attention_mask = _focus(plan, query, key, value, attention_mask)
    query = run.visit(f"{prefix}.hook_q", query)
    key = run.visit(f"{prefix}.hook_k", key)
    value = run.visit(f"{prefix}.hook_v", value)
    if run.wants(f"{prefix}.hook_scores"):
        attention_mask = _visit_scores(run, f"{prefix}.hook_scores", query, key, attention_mask,
                                       scaling, kwargs.get("position_bias"))
    context, weights = lean_eager(module, query, key, value, attention_mask, scaling=scaling,
                                  dropout=dropout, **kwargs)  # (B, Q, H, Dh), (B, H, Q, K)
    edited = run.visit(f"{prefix}.hook_pattern", weights)
    if edited is not weights:
        values = repeat_kv(value, query.size(1) // value.size(1))  # (B, H, K, Dh)
        context = torch.matmul(edited.to(values.dtype), values).transpose(1, 2).contiguous()
        weights = edited
    context = run.visit(f"{prefix}.hook_z", context)  # (B, Q, H, Dh)
    return context, weights


def _focus(plan, query, key, value, mask):
    """The focus layer's attention for some heads or rows only (LayerPlan.heads_of, .rows)."""
    if plan.heads_of is not None:  # the heads that share the asked head's keys and values
        group = query.size(1) // key.size(1)
        shared = plan.heads_of // group
        query = query[:, shared * group:(shared + 1) * group]  # (B, G, Q, Dh)
        key, value = key[:, shared:shared + 1], value[:, shared:shared + 1]  # (B, 1, K, Dh)
    if plan.rows is not None:
        query = query[:, :, plan.rows]  # (B, H, W, Dh), W = the rows asked for
        if mask is not None and mask.size(-2) > 1:  # (B, 1, 1, K) broadcasts as it is
            mask = mask[..., plan.rows, :]  # (B, 1, W, K)
    return query, key, value, mask


AttentionInterface.register(ATTENTION_NAME, attention_with_hooks)
# Masks are built per implementation: this one takes the same additive float masks as eager.
AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)
