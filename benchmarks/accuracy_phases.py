"""Phase accuracy at long positions: posembed's exact angles against the float32 product.

For a sinusoid table (d = 64) and RoPE cos/sin (head_dim = 128), both base 10000, the maximum
absolute error against float64 at positions around 1e4, 1e5, 1e6 and ``2**24 - 1``. The
reference is ``cos/sin(float64(p) * float64(w))`` of the SAME float32 frequencies ``w``, rounded
to float32 — so the numbers measure the angle, not the frequencies. "float32 product" is what
transformers, rotary-embedding-torch and positional-encodings do (``angles="fp32"``).

Run: ``python -m benchmarks.accuracy_phases`` (prints a Markdown table; writes nothing).
"""

from __future__ import annotations

import torch

from posembed import RotaryEmbedding, Sinusoidal

POSITIONS = {"1e4": 10_000, "1e5": 100_000, "1e6": 1_000_000, "2^24 - 1": 2**24 - 1}
WINDOW = 256  # positions ending at each of the above


def _reference(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angle = positions.double()[:, None] * inv_freq.float().double()
    return angle.cos().float(), angle.sin().float()


def _max_error(got: tuple[torch.Tensor, ...], expected: tuple[torch.Tensor, ...]) -> float:
    return max(float((a.double() - b.double()).abs().max()) for a, b in zip(got, expected))


def sinusoid_error(position: int, angles: str, dim: int = 64) -> float:
    module = Sinusoidal(dim, angles=angles)
    positions = torch.arange(position - WINDOW + 1, position + 1)
    table = module(positions)  # (T, C), interleaved [sin, cos]
    cos, sin = _reference(positions, module.inv_freq)
    return _max_error((table[:, 1::2], table[:, 0::2]), (cos, sin))


def rope_error(position: int, angles: str, head_dim: int = 128) -> float:
    rope = RotaryEmbedding(head_dim, angles=angles)
    positions = torch.arange(position - WINDOW + 1, position + 1)
    return _max_error(rope.cos_sin(positions), _reference(positions, rope.inv_freq))


def rows() -> list[tuple[str, str, list[float]]]:
    table = []
    for name, error in (("sinusoid d=64", sinusoid_error), ("RoPE head_dim=128", rope_error)):
        for label, angles in (("posembed (exact angles)", "exact"), ("float32 product (transformers)", "fp32")):
            table.append((name, label, [error(p, angles) for p in POSITIONS.values()]))
    return table


def markdown() -> str:
    lines = [
        "| scheme | angles | " + " | ".join(f"max abs error @ {k}" for k in POSITIONS) + " |",
        "|---|---|" + "---|" * len(POSITIONS),
    ]
    for name, label, errors in rows():
        lines.append(f"| {name} | {label} | " + " | ".join(f"{e:.1e}" for e in errors) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
