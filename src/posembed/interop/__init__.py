"""posembed.interop: Hugging Face checkpoints and configs at the edge, in three rooms and the zoo.

================ ===================================================================================
room             what
================ ===================================================================================
``hf/``          the embedding block in and out (``load_embeddings``, ``save_embeddings``), every
                 file checked before anything is built (``checks``), a config as a plain dict
                 (``config``)
``rope/``        a transformers config's RoPE read once into :class:`~posembed.interop.rope.settings.RopeSettings`
                 (``settings``, with the class rules of ``classes`` and ``latent``), the scheme built
                 from it (``config``: ``rotary_from_hf_config``), ``posembed rope check`` (``check``,
                 ``traps``, ``numbers``, ``check_plot``)
``extend/``      more positions for a BERT-family checkpoint (``__init__``: ``extend_checkpoint``;
                 ``methods``, ``finetune``), what it buys (``retrieval``, ``retrieval_data``,
                 ``retrieval_report``: ``posembed extend-eval``), position ids under padding and
                 packing (``position_check``)
``zoo``          the transformers families posembed reproduces, and how exactly
================ ===================================================================================
"""
