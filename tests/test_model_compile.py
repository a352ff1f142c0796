"""The lab's Decoder under ``torch.compile``: one graph, no graph break, for the schemes a GPU
trains most (learned absolute, RoPE, NoPE, ALiBi, T5 bias), in eval and in training.

Checked with ``torch._dynamo.explain`` (tracing only, nothing compiled: cheap) at a tiny size on
the CPU; a graph break would split the model into several compiled pieces with Python between
them, which costs on CUDA what nanoGPT's one graph does not.
"""

from __future__ import annotations

import pytest
import torch

from posembed.nn.model.transformer import Decoder
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.t5 import T5RelativeBias
from posembed.schemes.rotary.rope import RotaryEmbedding

SCHEMES = {
    "learned": lambda: LearnedAbsolute(16, 32),
    "rope": lambda: RotaryEmbedding(8, max_len=16),
    "nope": lambda: None,
    "alibi": lambda: ALiBi(4),  # the memory guard before a materialised bias is skipped while tracing
    "t5_bias": lambda: T5RelativeBias(4),
}


@pytest.mark.parametrize("name", list(SCHEMES))
def test_decoder_traces_as_one_graph(name):
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = Decoder(50, dim=32, depth=2, num_heads=4, scheme=SCHEMES[name](), bias=False)
    ids = torch.randint(0, 50, (2, 16))
    explained = torch._dynamo.explain(model.eval())(ids)
    reasons = [reason.reason for reason in explained.break_reasons]
    assert explained.graph_break_count == 0 and explained.graph_count == 1, reasons
    model.train()
    explained = torch._dynamo.explain(model)(ids)  # the training forward (dropout 0, the embedding block's path)
    assert explained.graph_break_count == 0, [reason.reason for reason in explained.break_reasons]
