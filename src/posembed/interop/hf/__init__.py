"""Hugging Face checkpoints in and out: the embedding block of a BERT-family model. Files:

- ``embedding_block.py``: the converter, :func:`~posembed.interop.hf.embedding_block.load_embeddings` /
  :func:`~posembed.interop.hf.embedding_block.save_embeddings` (an explicit key map, shape checks, safetensors or
  ``torch.load(weights_only=True)``; transformers itself is not needed);
- ``checks.py``: a checkpoint folder checked before anything is built from it (weight files, shapes);
- ``config.py``: a transformers config as a plain dict, from a folder, a file, a dict or a config object.
"""

from posembed._utils.names import submodules
from posembed.interop.hf.embedding_block import (
    HF_KEY_MAP,
    bert_family_problem,
    load_embeddings,
    read_embedding_config,
    save_embeddings,
)

__all__ = ["load_embeddings", "save_embeddings", "read_embedding_config", "bert_family_problem", "HF_KEY_MAP"]

__getattr__ = submodules(__name__)  # posembed.interop.hf.<file>: imported on first use
