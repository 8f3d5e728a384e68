"""``Workload``: batch size and token counts of one inference request."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import bad

#: Largest batch or token count: every integer up to 2⁵³ is exact in the float64 cost model.
MAX_COUNT = 2**53


@dataclass(frozen=True)
class Workload:
    """``batch`` sequences, each with ``input_tokens`` of prompt and ``output_tokens`` generated.

    Decode runs ``output_tokens`` steps with contexts ``input_tokens + t`` for t = 1..output_tokens
    (the paper's Eq. 4), so the mean context is S̄ = S_in + (S_out + 1)/2. ``attention`` is the
    serving stack's attention kernel: ``unfused`` (scores written to and read from memory, the
    paper's Tables 10-12) or ``fused`` (FlashAttention-style, scores stay on chip; the default: every
    engine in the published measurements uses it).
    """

    batch: int = 1
    input_tokens: int = 1024
    output_tokens: int = 16
    attention: str = "fused"

    def __post_init__(self) -> None:
        for key in ("batch", "input_tokens", "output_tokens"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise bad(key, v, "must be a positive integer")
            if v > MAX_COUNT:  # beyond 2⁵³ float64 arithmetic would silently round it
                raise bad(key, v, f"must be at most 2**53 = {MAX_COUNT:,}")
        if self.attention not in ("unfused", "fused"):
            raise bad("attention", self.attention, "must be unfused or fused")

    @property
    def mean_context(self) -> float:
        """S̄ = S_in + (S_out + 1)/2."""
        return self.input_tokens + (self.output_tokens + 1) / 2

    def to_dict(self) -> dict[str, int | str]:
        return {
            "batch": self.batch,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "attention": self.attention,
        }
