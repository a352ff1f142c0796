"""Rotary schemes: q and k rotated by their positions.

Files:

==================== ========================================================================
file                 what
==================== ========================================================================
``rope``             RoPE (Su et al. 2021): ``RotaryEmbedding``
``rotation``         RoPE's rotation: the formula, its compiled kernel, the dispatch point
``checks``           input checks of the rotary schemes
``layout``           q/k weights between the two RoPE channel layouts
``scaling``          context-extension variants (linear, NTK, Llama 3, ...)
``yarn``             YaRN
``longrope``         LongRoPE
``xpos``             xPos
``axial``            RoPE over several position axes
``pixtral``          Pixtral's 2-D RoPE
``mrope``            Qwen2-VL's multimodal RoPE
``mrope_positions``  M-RoPE's position ids for interleaved text, images and videos
``rerotate``         moving RoPE-rotated keys to new positions or another scheme
==================== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.schemes.rotary.<file>: imported on first use
