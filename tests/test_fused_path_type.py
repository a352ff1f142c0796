"""The embedding block's fast paths as a type: :class:`~posembed.nn.embedding.fast.FusedPath`, run
through one table by :func:`~posembed.nn.embedding.fast.run_fused_path`."""

from __future__ import annotations

import pytest
import torch

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.nn.embedding import fast as embedding_fast
from posembed.nn.embedding.fast import FusedPath, run_fused_path


def _block(**kwargs) -> TransformerEmbeddings:
    torch.manual_seed(0)
    return TransformerEmbeddings(40, 16, position=LearnedAbsolute(16, 16), type_vocab_size=2, **kwargs).eval()


def test_the_paths_are_a_str_enum_with_one_runner_each() -> None:
    assert [path.value for path in FusedPath] == ["chunked", "compiled"]
    assert set(embedding_fast._PATHS) == set(FusedPath)
    assert FusedPath.CHUNKED == "chunked" and f"{FusedPath.COMPILED}" == "compiled"


def test_the_cpu_block_answers_the_chunked_member_and_eager_blocks_none() -> None:
    ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(1))
    assert _block()._fused_path(torch.arange(12), ids) is FusedPath.CHUNKED
    assert _block(fused=False)._fused_path(torch.arange(12), ids) is None


@pytest.mark.parametrize("position_ids", [None, "given"])
def test_forward_is_the_chosen_path_run_through_the_table_bit_for_bit(position_ids) -> None:
    block, eager = _block(), _block(fused=False)
    generator = torch.Generator().manual_seed(2)
    ids, types = torch.randint(0, 40, (3, 12), generator=generator), torch.randint(0, 2, (3, 12), generator=generator)
    positions = None if position_ids is None else torch.randint(0, 16, (3, 12), generator=generator)
    out = block(ids, types, positions)
    resolved = torch.arange(12) if positions is None else positions
    direct = run_fused_path(block._fused_path(resolved, ids, types), block, ids, types, resolved, positions is None)
    assert torch.equal(out, direct)
    torch.testing.assert_close(out, eager(ids, types, positions), atol=1e-6, rtol=1e-5)


def test_an_unknown_path_is_refused() -> None:
    block = _block()
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="'fast' is not a valid FusedPath"):
        run_fused_path("fast", block, ids, None, torch.arange(4), True)
