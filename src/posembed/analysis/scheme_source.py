"""The inspector's :class:`~posembed.analysis.source_types.Source` for one library scheme alone,
built by the scheme factory, and the closeness between positions of schemes without a table.

A scheme is built for a model of width ``dim`` with :data:`INSPECT_HEADS` heads of width ``dim``
(rotary and Shaw schemes rotate / embed ``dim`` channels), ``max_len`` positions and causal
attention (ALiBi's one-sided bias, T5's one-sided buckets: ``--set symmetric=true`` /
``--set bidirectional=true`` for the encoder forms). Scheme arguments come as ``overrides``
(``posembed inspect --scheme rope_yarn --set factor=4 --set original_max_len=256``). The table
and the closeness are computed on ``device`` (a copy of the scheme there) and come back to the CPU.

Example:
    >>> source = load_scheme("sinusoidal", dim=16, max_len=32)
    >>> source.position_table.shape, source.family
    ((32, 16), 'scheme')
    >>> load_scheme("rope_yarn", dim=16, max_len=32, overrides={"factor": 4, "original_max_len": 16}).closeness.shape
    (32, 32)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from posembed.analysis.probes import MIN_POSITIONS
from posembed.analysis.source_types import Source
from posembed.analysis.text_model import device_copy
from posembed.schemes.base import AbsoluteScheme, BiasScheme, PositionScheme, RotaryScheme
from posembed.schemes.factory import ModelSizes, build_from_sizes, scheme_entry

__all__ = ["load_scheme", "rotary_closeness", "scheme_closeness", "MAX_POSITIONS", "INSPECT_HEADS", "INSPECT_DEFAULTS"]

#: most positions ``load_scheme`` analyses: the sections hold (T, T) float64 arrays (512 MB each at 8192;
#: ``--max-len 8192 --quick`` peaks near 6.6 GB and takes about a minute on 2 cores)
MAX_POSITIONS = 8192
#: heads of the model a scheme is inspected in
INSPECT_HEADS = 12
#: arguments given when the scheme takes them and the caller does not (Shaw needs a clipping distance)
INSPECT_DEFAULTS: dict[str, Any] = {"max_distance": 128}


def rotary_closeness(scheme: RotaryScheme, length: int, device: torch.device | None = None) -> np.ndarray:
    """Logits between a query and a key of ones rotated to positions i and j: ``(R_i 1)(R_j 1)^T / sqrt(D)``,
    computed on ``device`` (default: the CPU).

    Shape:
        returns ``(T, T)``, rows = query position.
    """
    device = torch.device("cpu" if device is None else device)
    ones = torch.ones(1, 1, length, scheme.head_dim, device=device)  # (B, H, T, D)
    with torch.no_grad():
        q, k = device_copy(scheme, device)(ones, ones)
    return (q[0, 0].double() @ k[0, 0].double().T / scheme.head_dim**0.5).cpu().numpy()


def scheme_closeness(source: Source, scheme: PositionScheme, length: int) -> None:
    """Fill ``source.closeness`` for a rotary or bias scheme (no table), with a note saying what it is;
    computed on ``source.device``."""
    kind = scheme.kind.value
    if isinstance(scheme, RotaryScheme):
        source.closeness = rotary_closeness(scheme, length, source.device)
        source.closeness_name = "rotary logit of ones"
    elif isinstance(scheme, BiasScheme) and not scheme.needs_qk:
        positions = torch.arange(length, device=source.device)
        with torch.no_grad():
            bias = device_copy(scheme, source.device).bias(positions, positions)
        if bias is not None:
            source.closeness = bias.double().mean(dim=0).cpu().numpy()  # (H, T, T) -> (T, T)
            source.closeness_name = "attention bias (mean over heads)"
    reason = f"{scheme.name} is a {kind} scheme: it has no position table"
    if source.closeness is not None:
        source.notes.append(f"{reason}; the properties section measures its {source.closeness_name} between positions.")
    else:
        source.notes.append(f"{reason}, and it gives no closeness between positions on its own.")


def _check_max_len(max_len: Any) -> None:
    if not isinstance(max_len, int) or max_len < MIN_POSITIONS:
        raise ValueError(f"--max-len must be an int >= {MIN_POSITIONS} for the analyses, got {max_len!r}")
    if max_len > MAX_POSITIONS:
        raise ValueError(
            f"--max-len {max_len} is too many positions: the inspector handles at most {MAX_POSITIONS} "
            "(its similarity maps and probes hold T x T arrays)"
        )


def _table(scheme: AbsoluteScheme, name: str, max_len: int, notes: list[str], device: torch.device) -> np.ndarray:
    """The ``(T, C)`` table of positions ``0 .. T-1`` (grids: along the first axis, other coordinates 0)."""
    ids = torch.arange(max_len, device=device)  # (T,)
    if scheme.num_axes > 1:
        ids = torch.stack([ids, *[torch.zeros_like(ids)] * (scheme.num_axes - 1)], dim=-1)  # (T, A)
        notes.append(
            f"{name} places {scheme.num_axes}-D coordinates: the table runs along the first axis, "
            "the other coordinates held at 0."
        )
    runner = device_copy(scheme, device)
    try:
        with torch.no_grad():
            table = runner(ids)
    except (ValueError, TypeError, RuntimeError) as error:
        raise ValueError(f"scheme {name!r} cannot make a table from positions 0..{max_len - 1}: {error}") from None
    if table.dim() != 2:
        raise ValueError(f"scheme {name!r} gives shape {tuple(table.shape)} for 1-D positions, not a (T, C) table")
    return table.double().cpu().numpy()


def load_scheme(
    name: str,
    dim: int | None = None,
    max_len: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    device: torch.device | None = None,
) -> Source:
    """Build a library scheme through the factory and, for absolute schemes, its ``(max_len, dim)`` table.

    ``overrides`` are the scheme's own arguments (``factor``, ``base`` ...); an unknown or
    wrong-typed one, or a required one missing, is a ``ValueError`` naming the accepted keys.
    The table or closeness is computed on ``device`` (default: the CPU); the scheme stays on the CPU.
    """
    entry = scheme_entry(name)
    dim = 768 if dim is None else dim
    max_len = 512 if max_len is None else max_len
    _check_max_len(max_len)
    kwargs = {key: value for key, value in INSPECT_DEFAULTS.items() if key in entry.accepted}
    kwargs.update(overrides or {})
    sizes = ModelSizes(dim=dim, num_heads=INSPECT_HEADS, head_dim=dim, max_len=max_len, causal=True)
    scheme = build_from_sizes(name, sizes, kwargs)
    source = Source(name=f"{name}-d{dim}-T{max_len}", family="scheme", positions=f"{name} ({scheme.kind.value} scheme)")
    source.device = torch.device("cpu" if device is None else device)
    source.scheme = scheme
    source.trained_length = getattr(scheme, "original_max_len", None)
    if isinstance(scheme, AbsoluteScheme):
        source.position_table = _table(scheme, name, max_len, source.notes, source.device)
    else:
        scheme_closeness(source, scheme, max_len)
    source.notes.append("a scheme alone has no tokens, text model or attention weights.")
    return source
