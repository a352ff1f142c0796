"""Give a BERT-family checkpoint folder more positions (``posembed extend``), and measure what that buys.

Files:

======================= ===========================================================================
``layout``              where a checkpoint keeps its position table (:func:`read_layout`), the errors
``checkpoint``          :func:`extend_checkpoint`: the new folder, weights and configs rewritten
``methods``             how new rows are made (``copy``, ``recurrent``, ``interpolate``, ``grouped``,
                        ``hierarchical``)
``finetune``            ``--finetune``: tune only the new rows
``retrieval``           ``posembed extend-eval``: the protocol, the systems, the run
``retrieval_data``      its passkey and needle documents, offline
``retrieval_embed``     its encoder: documents and queries to vectors, and their ranking
``retrieval_verdicts``  its primary comparisons under :mod:`posembed.stats.verdict` (McNemar, Holm)
``retrieval_report``    its summary, tables, HTML report and docs/checkpoints.md's blocks
``position_check``      ``posembed check-positions``: position ids under padding and packing
======================= ===========================================================================

:func:`extend_checkpoint` copies a whole Hugging Face checkpoint folder (a sentence-transformers
model included) to a new folder whose learned position table has ``to`` positions, grown by one
of :data:`posembed.interop.extend.methods.METHODS`. It rewrites only what the size touches:

* the weights (``model.safetensors``; a sharded checkpoint's affected shards and index; a
  ``pytorch_model.bin`` is converted to ``model.safetensors``, a sharded one shard by shard with a
  ``model.safetensors.index.json``): the position table and, when the file holds them, the
  ``position_ids`` / ``token_type_ids`` buffers;
* ``config.json``: ``max_position_embeddings`` and a ``posembed_extension`` record
  (``method``, ``original_positions``, ``positions``, ``original_max_position_embeddings``);
* ``tokenizer_config.json``: ``model_max_length`` (and a legacy ``max_len``);
* ``sentence_bert_config.json``: ``max_seq_length``, when the folder is a sentence-transformers model.

Every other file is copied unchanged, except weights in other formats (TensorFlow, Flax, ONNX,
OpenVINO, a stale ``pytorch_model.bin`` beside safetensors), which would no longer match
``config.json``: they are left out, with a warning, and listed in the result.

``to`` counts usable positions (tokens per input). RoBERTa-style models number positions from
``padding_idx + 1``: their table keeps its first ``padding_idx + 1`` rows and gets ``to`` more,
and ``max_position_embeddings`` becomes ``to + padding_idx + 1`` (roberta-base: 514 = 512 + 2).

A folder already extended by posembed is refused unless ``force=True``; then the current table
counts as trained, and the new record keeps the old one under ``previous``.

The folder is built in a temporary folder beside ``out`` and renamed into place, so ``out``
either holds the whole result or is left as it was.

Example:
    >>> import tempfile, pathlib, transformers
    >>> config = transformers.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=16, max_position_embeddings=16)
    >>> src = pathlib.Path(tempfile.mkdtemp()) / "bert"
    >>> transformers.BertModel(config).save_pretrained(src)
    >>> result = extend_checkpoint(src, src.parent / "bert-64", to=64, method="copy")
    >>> result.original_positions, result.positions, result.table_rows
    (16, 64, 64)
"""

from posembed._utils.names import submodules
from posembed.errors import AlreadyExtended, ExtensionError, UnsupportedCheckpoint
from posembed.interop.extend.checkpoint import extend_checkpoint
from posembed.interop.extend.layout import FAMILIES, CheckpointLayout, ExtensionResult, read_layout

__all__ = [
    "FAMILIES",
    "ExtensionError",
    "UnsupportedCheckpoint",
    "AlreadyExtended",
    "CheckpointLayout",
    "ExtensionResult",
    "read_layout",
    "extend_checkpoint",
]

__getattr__ = submodules(__name__)  # posembed.interop.extend.<file>: imported on first use
