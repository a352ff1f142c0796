"""A transformers config's RoPE, read once into settings and built through the scheme factory.

Files: ``settings.py`` (:class:`~posembed.interop.rope.settings.RopeSettings` per layer type, the reader's entry
points), ``parameters.py`` (the parameters per layer type), ``model.py`` (what the model's own transformers code
decides), ``sections.py`` (M-RoPE), ``axial.py`` (vision towers), ``width.py`` (head width, rotary widths, layout),
``table.py`` with ``rotations.json`` (each transformers family's rotation, declared; ``tools/rope_table.py`` writes it),
``config.py`` (:func:`~posembed.interop.rope.config.rotary_from_hf_config` / ``rotary_from_settings``).

``posembed rope check`` (:mod:`posembed.interop.rope_check`), the zoo and the inspector read the settings. Adding a
transformers rope type is a scheme file in ``schemes/`` and one ``SchemeEntry`` (its ``rope_type``, ``rope_needs``
and each argument's ``Arg.rope`` keys); nothing here changes.
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.interop.rope.<file>: imported on first use
