"""posembed._memory: huge-page advice for large fresh tensors changes speed, never values."""

import sys
from pathlib import Path

import pytest
import torch

from posembed._memory import MIN_BYTES, advise_huge_pages

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def test_small_and_non_cpu_tensors_are_left_alone():
    assert advise_huge_pages(torch.empty(MIN_BYTES // 4 - 1)) is False
    assert advise_huge_pages(torch.empty(MIN_BYTES // 4, device="meta")) is False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not THP.exists(), reason="needs Linux with THP")
def test_a_large_fresh_tensor_is_advised_and_keeps_its_values():
    out = torch.empty(4 * MIN_BYTES // 4)
    assert advise_huge_pages(out) is True
    out.fill_(3.0)
    assert bool((out == 3.0).all())
