"""Test helpers: the one tolerance helper (per dtype) and shared fixtures' plumbing."""

from __future__ import annotations

import torch

#: (atol, rtol) per dtype: fp32 tight, half types explicitly looser
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-6, 1e-5),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 2e-3),
}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, *, atol: float | None = None, rtol: float | None = None, msg: str = "") -> None:
    """Full-tensor comparison with the tolerance of ``actual``'s dtype (overridable)."""
    default_atol, default_rtol = TOLERANCES.get(actual.dtype, (1e-6, 1e-5))
    torch.testing.assert_close(
        actual,
        expected.to(actual.dtype) if expected.dtype != actual.dtype else expected,
        atol=default_atol if atol is None else atol,
        rtol=default_rtol if rtol is None else rtol,
        msg=(lambda m: f"{msg}\n{m}") if msg else None,
    )


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())
