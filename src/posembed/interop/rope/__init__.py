"""A transformers config's RoPE, read once into settings, built through the scheme factory, and checked.

Where transformers is installed, the settings are what the model's own code decides (its config object's
standardized ``rope_parameters``, aliases and per-layer sizes, its rotary embedding's widths, its attention's rotation
function); without it, what the config dict states. Files:

- ``settings.py``: :class:`~posembed.interop.rope.settings.RopeSettings` per layer type, the one reader's entry points,
  read from transformers' config object;
- ``parameters.py``: the RoPE parameters per layer type, from transformers' config object (standardized) or the dict
  as written, and the keys transformers ignores;
- ``model.py``: the model's own code: its config object, the part of a multimodal config, rotary widths, layout,
  the factors its rotary embedding's forward folds into cos / sin (PhiMoE's mscales), and whether that forward
  computes its own positions (EfficientLoFTR, EoMT-DINOv3: refused);
- ``sections.py``: M-RoPE's sections, arrangement and section order, read from what the model's rotary module does;
- ``axial.py``: a vision tower's axial RoPE (``rope_type == "axial"``, or a table of its own patch grid: Llama 4's):
  its axes, layout and placement, read from what the model's rotary module does, and the coordinates a grid's module
  rotates at;
- ``width.py``: the head width, rotary widths and layout of a config, from ``model.py`` or the dict;
- ``numbers.py``: numeric fields a config writes as strings;
- ``config.py``: :func:`~posembed.interop.rope.config.rotary_from_hf_config` / ``rotary_from_settings``: the
  factory entry of the settings' rope type, built from the values its arguments declare;
- ``check.py``, ``traps.py``, ``traps_scaling.py``, ``check_plot.py``: ``posembed rope check`` and its traps.

Adding a transformers rope type is a scheme file in ``schemes/``, one ``SchemeEntry`` in
``schemes/factory.py`` (its ``rope_type``, the ``rope_parameters`` fields it needs, and for each argument the
``Arg.rope`` keys it is read from) and one test; nothing here changes.
"""
