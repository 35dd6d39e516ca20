"""Configuration of the from-scratch encoder."""

from __future__ import annotations

from dataclasses import dataclass

NORM_STYLES = ("pre", "post")


def check_layer_settings(config, sizes: tuple[str, ...]) -> None:
    """The checks every from-scratch config shares: `sizes` are positive integers, the width
    splits evenly into heads, dropout in [0, 1), a positive norm epsilon, a known norm style."""
    kind = type(config).__name__
    for name in sizes:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{kind}.{name} must be a positive integer, got {value!r}")
    if config.hidden_size % config.num_heads:
        raise ValueError(
            f"hidden_size ({config.hidden_size}) must be divisible by num_heads ({config.num_heads})"
        )
    if not 0.0 <= config.dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {config.dropout}")
    if config.layer_norm_eps <= 0:
        raise ValueError(f"layer_norm_eps must be positive, got {config.layer_norm_eps}")
    if config.norm_style not in NORM_STYLES:
        raise ValueError(f"norm_style must be one of {NORM_STYLES}, got {config.norm_style!r}")


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
        check_layer_settings(self, ("vocab_size", "max_positions", "hidden_size", "num_heads",
                                    "num_layers", "intermediate_size"))
        if self.type_vocab_size < 0:
            raise ValueError(f"EncoderConfig.type_vocab_size must be >= 0, got {self.type_vocab_size}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads
