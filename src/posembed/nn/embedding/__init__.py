"""The input-embedding block: token + position + segment, LayerNorm, dropout.

Files:

=========== ========================================================================
file        what
=========== ========================================================================
``block``   ``TransformerEmbeddings``, its fast-path choice (``_fused_path``)
``checks``  its input checks (ids and positions against the tables)
``fast``    its two fast paths, run on its tables
=========== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.nn.embedding.<file>: imported on first use
