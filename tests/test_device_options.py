"""``--device`` of ``posembed inspect`` and ``posembed bench``: runs on the CPU, one clear line and
exit 2 for a device this machine lacks; on a GPU (tests marked ``cuda``) the same numbers there.

The CUDA decisions are checked without CUDA by mocking ``torch.cuda``; the tests that need a GPU
are marked ``cuda`` and skip without one.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from posembed.cli import main
from tests.analysis.tiny_checkpoints import save_lab_decoder

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _no_cuda(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def _error_line(capsys, argv: list[str], command: str) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(f"posembed {command}: error: ")
    return lines[0]


def _metrics(path) -> dict:
    metrics = json.loads((path / "metrics.json").read_text())
    metrics.pop("timings_seconds")
    return metrics


# ---------------------------------------------------------------------- inspect


def test_inspect_scheme_on_the_cpu_is_the_default_run(tmp_path, capsys, monkeypatch):
    _no_cuda(monkeypatch)  # auto is the CPU here
    base = ["inspect", "--scheme", "rope", "--dim", "16", "--max-len", "32", "--quick"]
    assert main([*base, "--out", str(tmp_path / "auto")]) == 0
    assert main([*base, "--out", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    assert _metrics(tmp_path / "cpu") == _metrics(tmp_path / "auto")
    assert "wrote" in capsys.readouterr().out


@pytest.mark.slow
def test_inspect_checkpoint_on_the_cpu(tmp_path, capsys):
    from posembed.schemes.bias.alibi import ALiBi

    folder = save_lab_decoder(tmp_path / "ckpt", ALiBi(4))
    argv = ["inspect", str(folder), "--quick", "--json", "--device", "cpu", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["kind"] == "bias" and len(metrics["layers"]["per_layer"]) == 3


def test_inspect_source_records_the_device(tmp_path):
    from posembed.cli import build_parser
    from posembed.cli.inspect import _source

    args = build_parser().parse_args(["inspect", "--scheme", "alibi", "--dim", "16", "--max-len", "32",
                                      "--device", "cpu"])  # fmt: skip
    assert _source(args).device == torch.device("cpu")


@pytest.mark.parametrize("where", ["scheme", "folder"])
def test_inspect_without_cuda_is_one_line(tmp_path, capsys, monkeypatch, where):
    _no_cuda(monkeypatch)
    target = ["--scheme", "sinusoidal"] if where == "scheme" else [str(tmp_path / "not-read")]
    out = tmp_path / "out"
    line = _error_line(capsys, ["inspect", *target, "--device", "cuda", "--out", str(out)], "inspect")
    assert "device 'cuda' asked for CUDA, but this torch" in line and "use --device cpu (or auto)" in line
    assert "unknown device 'tpu'" in _error_line(capsys, ["inspect", *target, "--device", "tpu"], "inspect")
    assert not out.exists()


def test_inspect_names_the_gpus_there_are(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    line = _error_line(capsys, ["inspect", "--scheme", "sinusoidal", "--device", "cuda:3"], "inspect")
    assert "this machine has 1 CUDA device(s), cuda:0..cuda:0" in line


def test_first_layer_moves_and_keeps_its_fields():
    from posembed.analysis.source_types import FirstLayer

    layer = FirstLayer(torch.ones(4, 4), None, torch.ones(4, 4), torch.zeros(4), torch.ones(4), torch.zeros(4),
                       1e-5, 2, "here")  # fmt: skip
    moved = layer.to(torch.device("meta"))
    assert moved.wq.device.type == "meta" and moved.bq is None and moved.bk.device.type == "meta"
    assert (moved.ln_eps, moved.num_heads, moved.where) == (1e-5, 2, "here")
    assert layer.wq.device.type == "cpu"  # the original stays on the CPU
    same = layer.to(torch.device("cpu"))
    assert same.wq is layer.wq and same.ln_bias is layer.ln_bias


def test_lab_text_model_keeps_its_model_on_the_cpu(monkeypatch):
    """Off the CPU the forward runs on a copy (``device_copy``): the report reads the CPU model's scheme."""
    from posembed.analysis import text_model
    from posembed.nn.model.transformer import Decoder
    from posembed.schemes.absolute.learned import LearnedAbsolute

    model = Decoder(11, dim=8, depth=1, num_heads=2, scheme=LearnedAbsolute(8, 8)).eval()
    copies = []

    def fake_device_copy(module, device):
        copies.append(device)
        return module  # the CPU stands in for the device

    monkeypatch.setattr(text_model, "device_copy", fake_device_copy)
    lab = text_model.LabTextModel(model, None, 11, 8, device=torch.device("cpu"))
    ids = torch.randint(0, 11, (2, 5))
    states = lab.hidden_states(ids)
    lab.hidden_states(ids)
    assert copies == [torch.device("cpu")]  # one copy, made on first use
    assert len(states) == 2 and all(h.device.type == "cpu" and h.dtype == torch.float32 for h in states)
    assert lab.model is model


# ---------------------------------------------------------------------- bench


@pytest.fixture
def tiny_rope(monkeypatch):
    pytest.importorskip("transformers")
    pytest.importorskip("x_transformers")
    from posembed.bench import rope as bench_rope

    monkeypatch.setattr(bench_rope, "QUICK", (1, 2, 16, 8))
    return bench_rope


def test_bench_on_the_cpu_records_the_device(tiny_rope, tmp_path, capsys, caplog):
    argv = ["bench", "--quick", "--only", "rope", "--repeats", "1", "--device", "cpu", "-q", "--out", str(tmp_path)]
    with caplog.at_level("INFO", logger="posembed.bench.rope"):
        assert main(argv) == 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["machine"]["device"] == "cpu" and payload["machine"]["device_name"] == "cpu"
    impls = {row["impl"] for row in payload["rows"] if row["median_ms"]}
    assert {tiny_rope.REFERENCE, tiny_rope.POSEMBED} <= impls and tiny_rope.LIGER not in impls
    assert any("Liger" in r.getMessage() and "CUDA" in r.getMessage() for r in caplog.records)  # why it is left out
    assert payload["targets"]  # the CPU checks its targets
    assert "device: cpu;" in (tmp_path / "results.md").read_text()
    assert "wrote" in capsys.readouterr().out


def test_bench_without_cuda_is_one_line_before_any_suite(tmp_path, capsys, monkeypatch):
    _no_cuda(monkeypatch)
    import posembed.bench as bench

    monkeypatch.setattr(bench, "run_suites", lambda **kwargs: pytest.fail("a suite ran"))
    line = _error_line(capsys, ["bench", "--quick", "--device", "cuda", "--out", str(tmp_path / "b")], "bench")
    assert "device 'cuda' asked for CUDA" in line and "use --device cpu" in line
    assert "unknown device 'gpu'" in _error_line(capsys, ["bench", "--device", "gpu"], "bench")
    assert not (tmp_path / "b").exists()


@pytest.mark.cuda
@needs_cuda
def test_bench_rope_on_cuda(tiny_rope, tmp_path):
    rows = tiny_rope.run(quick=True, repeats=1, device="cuda")
    timed = {row.impl for row in rows if row.median_ms}
    assert {tiny_rope.REFERENCE, tiny_rope.POSEMBED, "x-transformers"} <= timed
    if tiny_rope.liger_skip_reason("cuda") is None:
        assert tiny_rope.LIGER in timed


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("name", ["sinusoidal", "rope", "alibi"])
def test_inspect_scheme_on_cuda_matches_the_cpu(tmp_path, name):
    from posembed.analysis.sources import load_scheme

    on_cpu = load_scheme(name, dim=16, max_len=64)
    on_gpu = load_scheme(name, dim=16, max_len=64, device=torch.device("cuda"))
    for field in ("position_table", "closeness"):
        a, b = getattr(on_cpu, field), getattr(on_gpu, field)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    tensors = [*on_gpu.scheme.parameters(), *on_gpu.scheme.buffers()]
    assert all(t.device.type == "cpu" for t in tensors)  # the scheme stays on the CPU: the report reads it there


@pytest.mark.cuda
@needs_cuda
def test_inspect_lab_checkpoint_on_cuda(tmp_path, capsys):
    from posembed.schemes.rotary.rope import RotaryEmbedding

    folder = save_lab_decoder(tmp_path / "ckpt", RotaryEmbedding(8, max_len=64))
    for device in ("cpu", "cuda"):
        assert main(["inspect", str(folder), "--quick", "--device", device, "--out", str(tmp_path / device)]) == 0
    cpu, gpu = _metrics(tmp_path / "cpu"), _metrics(tmp_path / "cuda")
    assert cpu["kind"] == gpu["kind"] == "rotary"
    assert gpu["properties"].keys() == cpu["properties"].keys()
    assert len(gpu["layers"]["per_layer"]) == len(cpu["layers"]["per_layer"]) == 3


@pytest.mark.cuda
@needs_cuda
def test_inspect_hf_checkpoint_on_cuda(tmp_path, capsys, minilm_path):
    """MiniLM: the model's forward, the first-layer logits and the decomposition run on the GPU."""
    for device in ("cpu", "cuda"):
        assert main(["inspect", str(minilm_path), "--quick", "--device", device, "--out", str(tmp_path / device)]) == 0
    cpu, gpu = _metrics(tmp_path / "cpu"), _metrics(tmp_path / "cuda")
    for name, share in cpu["decomposition"]["shares"].items():
        assert gpu["decomposition"]["shares"][name] == pytest.approx(share, abs=1e-6)
    cpu_logits, gpu_logits = cpu["properties"]["first_layer_logits"], gpu["properties"]["first_layer_logits"]
    assert gpu_logits["phi_0"] == pytest.approx(cpu_logits["phi_0"], rel=1e-6)


@pytest.mark.cuda
@needs_cuda
def test_bench_suites_on_cuda(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from posembed.bench import attention as bench_attention
    from posembed.bench import embeddings as bench_embeddings
    from posembed.bench import training as bench_training

    monkeypatch.setattr(bench_embeddings, "QUICK", {"batch": 2, "length": 16, "width": 32, "vocab": 100})
    monkeypatch.setattr(bench_training, "CONFIG", {"depth": 1, "heads": 2, "dim": 16, "block": 8, "batch": 2})
    torch.cuda.reset_peak_memory_stats()
    rows = bench_embeddings.run(quick=True, repeats=1, device="cuda")
    timed = {row.impl for row in rows if row.median_ms}
    assert {bench_embeddings.REFERENCE, bench_embeddings.BLOCK} <= timed and bench_embeddings.FUSED not in timed
    assert torch.cuda.max_memory_allocated() > 0  # the work ran on the device named
    # heads of 8 channels: the ALiBi Decoder must not reach compiled FlexAttention (it lowers >= 16)
    torch.cuda.reset_peak_memory_stats()
    rows = bench_training.run(quick=True, repeats=1, device="cuda")
    assert all(row.median_ms for row in rows), rows
    assert torch.cuda.max_memory_allocated() > 0
    spec = {"impl": bench_attention.BASELINE, "scheme": "alibi", "length": 32, "mode": "train", "repeats": 1,
            "device": "cuda"}  # fmt: skip
    result = bench_attention.worker(spec)
    assert result["median_ms"] > 0 and result["peak_mb"] >= result["step_mb"] >= 0
