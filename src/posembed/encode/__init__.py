"""BERT inputs for a text or pair, and what the embedding block does to them (``posembed encode``).

Files:

=========== ========================================================================
file        what
=========== ========================================================================
``pairs``   ``encode_texts``: a text or pair as the block's inputs
``report``  ``explain_encoding``: the block's parts, token by token
=========== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.encode.<file>: imported on first use
