"""A transformers config's RoPE, read once into settings and built through the scheme factory.

Where transformers is installed, the settings are what the model's own code decides; without it, what the config
dict states. Files:

- ``settings.py``: :class:`~posembed.interop.rope.settings.RopeSettings` per layer type, the reader's entry points;
- ``parameters.py``: the RoPE parameters per layer type, from transformers' config object or the dict as written;
- ``model.py``: the model's own code: its config object (built once per dict), the part of a multimodal config,
  rotary widths, layout, the factors its rotary forward folds into cos / sin, whether it computes its own positions;
- ``sections.py``: M-RoPE's sections, read from what the model's rotary module does;
- ``axial.py``: a vision tower's axial RoPE, read from what the model's rotary module does;
- ``width.py``: the head width, rotary widths and layout of a config;
- ``config.py``: :func:`~posembed.interop.rope.config.rotary_from_hf_config` / ``rotary_from_settings``.

``posembed rope check`` (:mod:`posembed.interop.rope_check`), the zoo and the inspector read the settings. Adding a
transformers rope type is a scheme file in ``schemes/`` and one ``SchemeEntry`` (its ``rope_type``, ``rope_needs``
and each argument's ``Arg.rope`` keys); nothing here changes.
"""
