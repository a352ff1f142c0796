"""Self-attention over any scheme kind (absolute, rotary, bias) and its backends.

Files:

============= ========================================================================
file          what
============= ========================================================================
``layer``     ``SelfAttention``: projections, the scheme, the softmax scale, the output
``backends``  the one dispatch (``choose_backend``): eager, SDPA, FlexAttention, chunked, fused
``inputs``    a backend's inputs: bias and mask terms
``kernels``   the backends' eager, SDPA and chunked bodies
============= ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.nn.attention.<file>: imported on first use
