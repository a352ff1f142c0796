"""The catalogue's comparison arithmetic: cos/sin as ``(T, W)``, values in any channel order, q/k rotated by a
model's own rotation function in whichever of the usual forms it reads, and q·kᵀ scores.

Also an axial module's call at a grid, which of a module's two outputs is the cosine, the width an attention hands
its rotation function and the head width a config gives. Used by :mod:`tests.interop.rope_catalogue_compare` (which
re-exports these names); nothing here imports transformers or posembed.
"""

from __future__ import annotations

import inspect

import torch

#: cos/sin absolute tolerance (the catalogue's target; :data:`tests.interop.rope_catalogue_compare.COS_TOL`)
COS_TOL = 1e-6


def two_d(t: torch.Tensor) -> torch.Tensor:
    """A ``(..., T, W)`` cos / sin without its leading ones (or a ``(T, 1, W)`` table's one: Llama 4's vision
    tower), as ``(T, W)``."""
    while t.dim() > 2:
        if t.shape[0] == 1:
            t = t[0]
        elif t.dim() == 3 and t.shape[1] == 1:
            t = t[:, 0]
        else:
            raise ValueError(f"cos/sin of shape {tuple(t.shape)}")
    return t


def their_cos_sin(out) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(out, torch.Tensor) and out.is_complex():
        return two_d(out.real).float(), two_d(out.imag).float()
    cos, sin = out[0], out[1]
    return two_d(cos).float(), two_d(sin).float()


def values_match(theirs: torch.Tensor, ours: torch.Tensor) -> bool:
    """The same values at every position, in any channel order (each of ours used twice when theirs is twice as
    wide)."""
    ours = two_d(ours).float()
    if theirs.shape[-1] == 2 * ours.shape[-1]:
        ours = torch.cat([ours, ours], -1)
    if theirs.shape != ours.shape:
        return False
    return bool(((theirs.sort(-1).values - ours.sort(-1).values).abs().max() <= COS_TOL).item())


def _call_apply(fn, q, k, out, positions):
    names = [
        n
        for n, p in inspect.signature(fn).parameters.items()
        if p.default is inspect.Parameter.empty or n in ("k", "cos", "sin")
    ]  # Qwen4-Exp's k=None, cos=None, ...
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


def cos_first(out):
    """The module's ``(cos, sin)``, also where its forward returns ``(sin, cos)`` (GPT-J, CodeGen): the one that is
    zero at position 0 (the first position given) is the sine."""
    if isinstance(out, torch.Tensor) or len(out) != 2:
        return out
    if not all(isinstance(part, torch.Tensor) and part.dim() for part in out):
        return out
    first, second = (part.reshape(-1, part.shape[-1])[0] for part in out)
    return (out[1], out[0]) if bool((first == 0).all()) and not bool((second == 0).all()) else out


def sliced_width(config, cos: torch.Tensor, out) -> int:
    """The channels an attention that slices q / k before rotating hands its rotation function: the config's
    ``rotary_dim`` (GPT-J, CodeGen), else as many as cos/sin are wide (twice for complex frequencies)."""
    return int(getattr(config, "rotary_dim", None) or cos.shape[-1] * (2 if isinstance(out, torch.Tensor) else 1))


def model_head_dim(config) -> int | None:
    """The head width the attention reads, as transformers' attention classes do (``None``: the config gives none)."""
    try:
        return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    except Exception:  # noqa: BLE001 - a config without these fields
        return None


def axial_call(rotary, axes: int = 0):
    """``(output, coordinates given, coords (N, A))`` of the module at a grid, in the form its forward reads."""
    h, w = torch.meshgrid(torch.arange(4), torch.arange(5), indexing="ij")
    for count in (axes,) if axes else (2, 3):
        rows = [h.flatten(), w.flatten(), (h + 2 * w).flatten()][:count]
        coords = torch.stack(rows, -1)  # (N, A)
        for form in (coords.T, coords, coords[None], coords.T[:, None]):
            try:
                out = rotary(torch.zeros(1, 20, 8), form)
            except Exception:  # noqa: BLE001 - the wrong form: try the next
                continue
            cos = out[0]
            while cos.dim() > 2 and cos.shape[0] == 1:
                cos = cos[0]
            widths = (
                2 * rotary.inv_freq.numel(),
                2 * count * rotary.inv_freq.numel(),
            )  # one set of pairs, or one per axis
            if cos.dim() == 2 and cos.shape[0] == 20 and cos.shape[1] in widths:
                return out, form, coords
    raise ValueError("its forward reads none of the coordinate forms (A, N), (N, A), (1, N, A), (A, 1, N)")


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q.double() @ k.double().transpose(-1, -2)
