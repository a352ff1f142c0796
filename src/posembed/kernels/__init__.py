"""Fast paths: pure functions and autograd Functions with eager-parity tests.

============================ ============================================== ===================
function                     replaces                                       dispatch condition
============================ ============================================== ===================
``fused_embedding``          gather + add + LayerNorm + dropout of the       ``combine="add"``, a
                             embedding block (``BertEmbeddings``), chunked   lookup-table position,
                                                                            CPU
``compiled_embedding``       the same block as one compiled kernel           the same, CUDA
                             (``embedding_compiled``; Triton via Inductor)
``rope.rotate``              the eager RoPE rotation (compiled kernel)       opt-in (compiles)
``bias_attention``           materialised ``(H, T, T)`` bias + softmax       bias scheme without
                             (blockwise, recomputing backward)               q/k, 1-D positions
``cpu_matmul.bf16_matmuls``  fp32 matrix products (bf16 math mode, AMX;      opt-in (changes the
                             attention kept fp32 by ``fp32_sdpa``)           numbers), CPU
============================ ============================================== ===================

Each module's docstring states exactly when it applies; callers keep the eager path. Below
them: :mod:`posembed.kernels.masks` (the attention masking rule every backend shares) and
:mod:`posembed.kernels.dropout` (the fused embedding's keep masks).

Files:

====================== =========================================================================
file                   what
====================== =========================================================================
``embedding``          ``fused_embedding``: the chunked embedding block (CPU)
``embedding_compiled`` ``compiled_embedding``: the embedding block as one compiled kernel (CUDA)
``dropout``            the fused embedding's dropout keep masks
``attention``          ``bias_attention``: attention with a bias scheme in query blocks
``masks``              the masking rule every attention path shares
``rope``               the compiled RoPE kernel (``rope.rotate``)
``cpu_matmul``         ``bf16_matmuls``: bf16 matrix products on the CPU, ``fp32_sdpa`` beside them
====================== =========================================================================
"""

from posembed._utils.names import submodules
from posembed.kernels.attention import bias_attention
from posembed.kernels.embedding import combined_table, fused_embedding
from posembed.kernels.embedding_compiled import compiled_embedding

__all__ = ["bias_attention", "combined_table", "compiled_embedding", "fused_embedding"]

__getattr__ = submodules(__name__)  # posembed.kernels.<file>: imported on first use
