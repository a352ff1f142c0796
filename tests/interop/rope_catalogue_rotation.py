"""The catalogue's comparison arithmetic: cos/sin as ``(T, W)``, values in any channel order, q/k rotated by a
model's own rotation function in whichever of the usual forms it reads, and q·kᵀ scores.

Used by :mod:`tests.interop.rope_catalogue_compare` (which re-exports these names); nothing here imports
transformers or posembed.
"""

from __future__ import annotations

import inspect

import torch

#: cos/sin absolute tolerance (the catalogue's target; :data:`tests.interop.rope_catalogue_compare.COS_TOL`)
COS_TOL = 1e-6


def two_d(t: torch.Tensor) -> torch.Tensor:
    """A ``(..., T, W)`` cos / sin without its leading ones, as ``(T, W)``."""
    while t.dim() > 2:
        if t.shape[0] != 1:
            raise ValueError(f"cos/sin of shape {tuple(t.shape)}")
        t = t[0]
    return t


def their_cos_sin(out) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(out, torch.Tensor) and out.is_complex():
        return two_d(out.real).float(), two_d(out.imag).float()
    cos, sin = out[0], out[1]
    return two_d(cos).float(), two_d(sin).float()


def values_match(theirs: torch.Tensor, ours: torch.Tensor) -> bool:
    """The same values at every position, in any channel order (each of ours used twice when theirs is twice as wide)."""
    ours = two_d(ours).float()
    if theirs.shape[-1] == 2 * ours.shape[-1]:
        ours = torch.cat([ours, ours], -1)
    if theirs.shape != ours.shape:
        return False
    return bool(((theirs.sort(-1).values - ours.sort(-1).values).abs().max() <= COS_TOL).item())


def _call_apply(fn, q, k, out, positions):
    names = [n for n, p in inspect.signature(fn).parameters.items()
             if p.default is inspect.Parameter.empty or n in ("k", "cos", "sin")]  # Qwen4-Exp's k=None, cos=None, ...
    cos_sin = (out,) if isinstance(out, torch.Tensor) else tuple(out)
    pair = len(names) > 1 and names[1].lower().lstrip("x").startswith("k")
    rest = names[2:] if pair else names[1:]
    args = []
    for name in rest:
        if name.startswith("cos") or name.startswith("freqs"):
            args.append(cos_sin[0])
        elif name.startswith("sin"):
            args.append(cos_sin[1])
        elif name == "position_ids":
            args.append(positions)
        else:
            raise ValueError(f"{fn.__name__} needs {name}")
    if pair:
        return fn(q, k, *args)
    return fn(q, *args), fn(k, *args)


#: the q / k forms a rotation function may read, as permutations of (H, T, D)
_FORMS = ((lambda x: x[None], lambda y: y[0]),
          (lambda x: x.transpose(0, 1)[None], lambda y: y[0].transpose(0, 1)),
          (lambda x: x.transpose(0, 1), lambda y: y.transpose(0, 1)),
          (lambda x: x, lambda y: y))  # fmt: skip


def their_rotation(fn, q, k, out, positions, width: int):
    """q and k ``(H, T, D)`` rotated by ``fn`` (first the whole head, else its first ``width`` channels)."""
    for head in (q.shape[-1], width):
        for to, back in _FORMS:
            try:
                rq, rk = _call_apply(fn, to(q[..., :head]), to(k[..., :head]), out, positions)
                rq, rk = back(rq), back(rk)
            except (RuntimeError, ValueError, IndexError):
                continue
            if rq.shape == q[..., :head].shape:
                return torch.cat([rq, q[..., head:]], -1), torch.cat([rk, k[..., head:]], -1)
    raise ValueError(f"{fn.__name__} takes none of the q/k forms tried")


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q.double() @ k.double().transpose(-1, -2)
