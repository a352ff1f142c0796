"""The library's modules: the input-embedding block, self-attention over any scheme, small models.

Files:

============== ========================================================================
file           what
============== ========================================================================
``attention``  self-attention over any scheme kind and its backends
``embedding``  the input-embedding block (token + position + segment, LayerNorm, dropout)
``model``      small ``Encoder`` / ``Decoder`` built only from the blocks
============== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.nn.<file>: imported on first use
