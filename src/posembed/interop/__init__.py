"""posembed.interop: Hugging Face checkpoints and configs at the edge, in four rooms and the zoo.

================ ===================================================================================
room             what
================ ===================================================================================
``hf/``          the embedding block in and out (``load_embeddings``, ``save_embeddings``), every
                 file checked before anything is built (``checks``), a config as a plain dict
                 (``config``)
``rope/``        a transformers config's RoPE read once into :class:`~posembed.interop.rope.settings.RopeSettings`
                 (``settings``), the scheme built from it (``config``: ``rotary_from_hf_config``)
``rope_check/``  ``posembed rope check``, a reader of those settings (``check``, ``traps``, ``stated``,
                 ``numbers``, ``check_plot``)
``extend/``      more positions for a BERT-family checkpoint (``__init__``: ``extend_checkpoint``;
                 ``methods``, ``finetune``), what it buys (``retrieval``, ``retrieval_data``,
                 ``retrieval_report``: ``posembed extend-eval``), position ids under padding and
                 packing (``position_check``)
``zoo``          the transformers families posembed reproduces, and how exactly
================ ===================================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.interop.<file>: imported on first use
