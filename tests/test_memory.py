"""posembed._utils.memory: huge-page advice for large fresh tensors changes speed, never values."""

import sys
from pathlib import Path

import pytest
import torch

from posembed._utils.memory import MIN_BYTES, advise_huge_pages

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


@pytest.mark.slow
def test_the_advice_can_be_turned_off_for_a_block_and_from_the_environment():
    import subprocess

    from posembed._utils.memory import huge_pages

    large = 4 * MIN_BYTES // 4
    with huge_pages(False):
        assert advise_huge_pages(torch.empty(large)) is False
    expected = sys.platform.startswith("linux") and THP.exists()
    assert advise_huge_pages(torch.empty(large)) is expected  # restored after the block
    import os

    # this checkout's posembed, whatever is installed: its src first on PYTHONPATH, the rest of the env kept
    src = Path(__file__).resolve().parents[1] / "src"
    assert (src / "posembed" / "_utils" / "memory.py").is_file()
    code = (
        "import torch, posembed; from posembed._utils.memory import advise_huge_pages as a; "
        "print(posembed.__file__); print(a(torch.empty(1 << 22)))"
    )
    python_path = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    for value, expected_advice in (("0", False), ("1", expected)):
        env = {**os.environ, "PYTHONPATH": python_path, "POSEMBED_HUGE_PAGES": value}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        imported, advice = done.stdout.split()
        assert Path(imported).resolve().is_relative_to(src), (imported, src)
        assert advice == str(expected_advice), (value, done.stdout)


def test_the_kernel_mode_is_reported():
    from posembed._utils.memory import transparent_huge_pages

    mode = transparent_huge_pages()
    assert mode in {"always", "madvise", "never", "unknown"}
    if THP.exists():
        assert f"[{mode}]" in THP.read_text()
