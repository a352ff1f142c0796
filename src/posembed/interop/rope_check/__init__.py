"""``posembed rope check``: a config's RoPE pair by pair, against transformers, and the traps it falls into.

A consumer of :class:`~posembed.interop.rope.settings.RopeSettings`, like the zoo and the inspector; it alone reads
what the config wrote beside them (its traps must see it). Files:

- ``check.py``: :func:`~posembed.interop.rope_check.check.check_rope_config`, the report and its text / JSON;
- ``check_plot.py``: the wavelength plot (matplotlib, lazily);
- ``stated.py``: what the config writes per layer type, the keys transformers ignores;
- ``numbers.py``: numeric fields a config writes as strings, read once;
- ``traps.py``, ``traps_scaling.py``: the traps, every layer's and the scaled rope types'.
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.interop.rope_check.<file>: imported on first use
