"""Configuration of the from-scratch encoder."""

from __future__ import annotations

from dataclasses import dataclass

NORM_STYLES = ("pre", "post")


@dataclass(frozen=True)
class EncoderConfig:
    """Sizes and switches of the from-scratch encoder.

    `norm_style="pre"` normalises before each sub-layer (as in the textbook chapter);
    `"post"` normalises after each residual sum (as in BERT).
    """

    vocab_size: int = 30522
    max_positions: int = 512
    type_vocab_size: int = 2
    hidden_size: int = 128
    num_heads: int = 4
    num_layers: int = 4
    intermediate_size: int = 512
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    norm_style: str = "pre"
    causal: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_positions", "hidden_size", "num_heads",
                     "num_layers", "intermediate_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"EncoderConfig.{name} must be a positive integer, got {value!r}")
        if self.type_vocab_size < 0:
            raise ValueError(f"EncoderConfig.type_vocab_size must be >= 0, got {self.type_vocab_size}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps}")
        if self.norm_style not in NORM_STYLES:
            raise ValueError(f"norm_style must be one of {NORM_STYLES}, got {self.norm_style!r}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads
