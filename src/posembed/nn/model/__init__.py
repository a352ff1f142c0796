"""Small transformers built only from the blocks.

Files:

================ ========================================================================
file             what
================ ========================================================================
``transformer``  ``Encoder``, ``Decoder``, ``build_model``
``layers``       one layer: attention and MLP, one scheme per layer or one for all
``checks``       the model's argument checks
================ ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.nn.model.<file>: imported on first use
