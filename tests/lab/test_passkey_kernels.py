"""Passkey retrieval at L on torch's AVX-512 and AVX2 CPU kernels: the verdict the page states for each
kernel set (``results/context/passkey-rate.json``, the ``context-passkey-rate`` block of
docs/results.md) holds when the study's command runs again under that kernel set.

Each run is a subprocess (the capability is chosen when torch loads), at 1 thread, with
``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2`` for AVX2 and none of
them for the machine's own kernels; each run reports the capability torch took, and a kernel set this
machine cannot run is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import posembed
from tools import context_page

ROOT = Path(__file__).resolve().parents[2]
#: what the page's AVX2 command sets; the AVX-512 runs set none of these
AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
#: the overrides of the page's rate command: the RoPE model alone, passkey at L
RATE = ["references=", "finetune_methods=", "methods=extrapolate", "scales=1"]
#: a CI-sized run of the same code path (a few seconds of CPU): the kernel sets' arithmetic differs
TINY = [
    *RATE,
    "dim=32",
    "heads=2",
    "steps=60",
    "batch=4",
    "warmup=5",
    "passkey_only_steps=10",
    "passkey_adjacent_steps=5",
    "depths=2",
    "passkey_samples=2",
    "lm_windows=1",
]

_SCRIPT = """
import json, sys, tempfile, torch
from posembed.lab.context.presets import get_context_preset, with_overrides
from posembed.lab.context.run import run_context
from posembed.lab.context.store import NO_DEPTH, ContextStore
torch.set_num_threads(1)
cfg = with_overrides(get_context_preset("context"), sys.argv[1:])
with tempfile.TemporaryDirectory() as out:
    store = ContextStore(run_context(cfg, out))
    run = cfg.per_seed()[0]
    value, = [r["value"] for r in store.rows(run.config_id) if (r["model"], r["metric"], r["depth"], r["length"])
              == ("rope", "passkey_mean", NO_DEPTH, run.context)]
    loss = store.models(run.train_id)["rope"]["final_loss"]
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "accuracy": value, "loss": loss}))
"""


def _run(kernels: str, overrides: list[str]) -> dict:
    """The study's run of ``overrides`` in a fresh process on ``kernels`` ("avx512": the machine's own,
    "avx2": :data:`AVX2_ENV`): torch's capability there, RoPE's passkey accuracy at L and final loss."""
    env = {k: v for k, v in os.environ.items() if k not in AVX2_ENV}
    env.update(
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(Path(posembed.__file__).resolve().parents[1]),
        **(AVX2_ENV if kernels == "avx2" else {}),
    )
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *overrides], env=env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _stored() -> dict:
    return json.loads((ROOT / "results" / "context" / "passkey-rate.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_avx2_environment_takes_and_changes_the_arithmetic():
    """The premise of stating two rates: the AVX2 variables switch torch's kernels in the subprocess, and
    on a machine with AVX-512 the same seed then trains to a different loss."""
    own, avx2 = _run("avx512", [*TINY, "seeds=1"]), _run("avx2", [*TINY, "seeds=1"])
    assert avx2["capability"] == "AVX2"
    assert 0.0 <= own["accuracy"] <= 1.0 and 0.0 <= avx2["accuracy"] <= 1.0
    if own["capability"] != "AVX512":
        pytest.skip(f"this machine's kernels are {own['capability']}, not AVX-512: nothing to compare")
    assert own["loss"] != avx2["loss"]


def _latest() -> dict[str, tuple[str, dict]]:
    """Kernels ("AVX-512", "AVX2") -> (name, set): of the stored sets of runs of the latest day, the one
    with the most seeds on each kernel set."""
    sets = _stored()["sets"]
    day = max(values["date"] for values in sets.values())
    latest = sorted((len(values["accuracy_at_L"]), name) for name, values in sets.items() if values["date"] == day)
    return {sets[name]["kernels"]: (name, sets[name]) for _, name in latest}


def test_the_stored_rate_has_both_kernel_sets_of_one_day_and_the_page_states_their_commands():
    latest = _latest()
    assert set(latest) == {"AVX-512", "AVX2"}
    (_, wide), (_, narrow) = latest["AVX-512"], latest["AVX2"]
    assert (wide["capability"], narrow["capability"], wide["machine"]) == ("AVX512", "AVX2", narrow["machine"])
    assert all(f"{k}={v}" in narrow["command"] for k, v in AVX2_ENV.items())
    assert not any(k in wide["command"] for k in AVX2_ENV)
    assert set(wide["accuracy_at_L"]) & set(narrow["accuracy_at_L"])
    text = context_page.rate_text(_stored())
    assert wide["command"] in text and narrow["command"] in text


def _compared() -> list[tuple[str, str]]:
    """(kernels, seed) for the first seed run on both kernel sets on the latest day."""
    latest = _latest()
    shared = sorted(set(latest["AVX-512"][1]["accuracy_at_L"]) & set(latest["AVX2"][1]["accuracy_at_L"]), key=int)
    return [(kernels, shared[0]) for kernels in ("AVX-512", "AVX2")]


@pytest.mark.slow
@pytest.mark.parametrize(("kernels", "seed"), _compared())
def test_the_latest_verdict_on_each_kernel_set_reproduces(kernels, seed):
    """The page's command for a seed run on both kernel sets on the latest day (about 70 s of CPU per run
    at 1 thread, more on a loaded machine): the verdict, and the accuracy, are the stored ones on this
    machine's kernels of that set."""
    if float(os.environ.get("POSEMBED_SLOW_SCALE", "1")) < 1:
        pytest.skip("the stored verdict is of the full-size run; it has no reduced form")
    name, values = _latest()[kernels]
    found = _run("avx2" if kernels == "AVX2" else "avx512", [*RATE, f"seeds={seed}"])
    if found["capability"] != values["capability"]:
        pytest.skip(
            f"this machine runs {found['capability']} kernels, the stored set {name!r} took {values['capability']}"
        )
    assert (found["accuracy"] >= _stored()["criterion"]) == context_page.retrieves(_stored())[name][seed]
    assert found["accuracy"] == values["accuracy_at_L"][seed]
