"""Bias schemes: a term added to the attention scores (or none: NoPE).

Files:

=============== ========================================================================
file            what
=============== ========================================================================
``relative``    relative positions shared by the bias schemes
``nope``        no positional encoding (NoPE)
``alibi``       ALiBi
``t5``          T5's bucketed relative bias
``kerple``      KERPLE
``fire``        FIRE
``sandwich``    Sandwich
``dynamic``     an MLP of the distance
``forgetting``  the Forgetting Transformer's gates
``cope``        CoPE, contextual positions
``shaw``        Shaw-style relative embeddings
``deberta``     DeBERTa's disentangled relative attention
=============== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.schemes.bias.<file>: imported on first use
