"""The context study's references (ALiBi, NoPE, FIRE, KERPLE, Sandwich, CoPE): how each is built,
what stays reusable, FIRE's progressive interpolation past L, and a stale stored model."""

from __future__ import annotations

import dataclasses
import logging
import shutil

import pytest
import torch

import posembed.lab.context.evaluate as context_evaluate
import posembed.lab.context.models as context_models
import posembed.lab.context.train as context_train
from posembed.lab.context.models import STUDY_SCHEMES, build_context_model
from posembed.lab.context.presets import (
    REFERENCES,
    SMOKE_REFERENCES,
    ContextConfig,
    get_context_preset,
    with_overrides,
)
from posembed.lab.context.run import run_context
from posembed.lab.context.store import ContextStore
from posembed.nn.model.transformer import Decoder
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.fire import fire_inputs
from posembed.schemes.factory import FACTORY, REFERENCE_SCHEMES, ModelSizes, build_from_sizes
from posembed.schemes.rotary.rope import RotaryEmbedding

CFG = ContextConfig(name="x", context=96, dim=16, depth=1, heads=2)


def test_every_known_reference_has_settings_and_the_presets_list_them():
    assert REFERENCE_SCHEMES == REFERENCES == ("alibi", "nope", "fire", "kerple", "sandwich", "cope")
    assert STUDY_SCHEMES == ("rope", *REFERENCES)
    assert get_context_preset("context").references == REFERENCES
    assert get_context_preset("context-smoke").references == SMOKE_REFERENCES == ("alibi", "nope", "fire")
    with pytest.raises(ValueError, match="references: unknown t5_bias; known: alibi, nope, fire"):
        ContextConfig(name="x", references=("t5_bias",))
    with pytest.raises(ValueError, match="unknown study scheme 'xpos'; known: rope, alibi"):
        build_context_model(CFG, "xpos", 11)


def test_reference_schemes_are_built_as_documented():
    built = {name: build_context_model(CFG, name, 11).scheme for name in REFERENCES}
    assert built["nope"] is None
    assert type(built["alibi"]).__name__ == "ALiBi" and not built["alibi"].symmetric
    fire = built["fire"]
    assert (fire.init_threshold, fire.init_c) == (CFG.context / 4, 0.1)
    assert fire.threshold.item() == 24.0 and fire.c.item() == pytest.approx(0.1)
    assert built["kerple"].kernel == "log"
    assert (built["sandwich"].dim, built["sandwich"].num_heads) == (CFG.dim, CFG.heads)
    assert (built["cope"].npos_max, built["cope"].head_dim) == (CFG.context, CFG.dim // CFG.heads)


def test_rope_alibi_and_nope_are_built_as_before_so_stored_models_stay_valid():
    """The earlier study built ALiBi as ``ALiBi(heads)`` after seeding: same config, same weights."""
    rope = lambda: RotaryEmbedding(CFG.dim // CFG.heads, base=10000.0, max_len=None)  # noqa: E731
    for name, scheme in (("rope", rope), ("alibi", lambda: ALiBi(CFG.heads)), ("nope", lambda: None)):
        torch.manual_seed(CFG.seed)
        before = Decoder(11, dim=CFG.dim, depth=CFG.depth, num_heads=CFG.heads, scheme=scheme())
        now = build_context_model(CFG, name, 11)
        assert now.config_dict() == before.config_dict()
        assert all(torch.equal(now.state_dict()[k], v) for k, v in before.state_dict().items())


def test_references_and_methods_change_the_config_id_not_the_train_id():
    old = ContextConfig(name="context", references=("alibi", "nope"))
    assert old.train_id == ContextConfig(name="context").train_id
    assert old.config_id != ContextConfig(name="context").config_id
    # the context preset's models were stored under this id before the references were added (and
    # before the adjacent-key curriculum, which moved the presets' ids)
    assert dataclasses.replace(get_context_preset("context"), passkey_adjacent_steps=0).train_id == "990bc73ee87c47ab"
    assert (
        dataclasses.replace(get_context_preset("context-smoke"), passkey_adjacent_steps=0).train_id
        == "e65da56e2c73a98c"
    )
    assert get_context_preset("context-smoke").train_id == "466a6da069f7d5af"


def test_fire_is_evaluated_with_progressive_interpolation_past_L():
    """Past L the normaliser psi(max(L0, i)) follows the query: every distance maps into [0, 1],
    key 0 at exactly 1 for every query past the threshold, as in training."""
    model = build_context_model(CFG, "fire", 11).eval()
    assert model.max_len is None
    length = 8 * CFG.context
    positions = torch.arange(length)
    fire = model.scheme
    c, threshold, _ = (t.detach() if isinstance(t, torch.Tensor) else t for t in fire._constants())
    x = fire_inputs((positions[:, None] - positions[None, :]).float(), positions[:, None].float(), c, threshold)
    causal = positions[None, :] <= positions[:, None]
    assert float(x[causal].min()) >= 0.0 and float(x[causal].max()) <= 1.0 + 1e-6
    past = positions >= CFG.context // 4
    assert torch.allclose(x[past, 0], torch.ones(int(past.sum())))
    with torch.no_grad():
        assert torch.allclose(fire.bias(positions, positions), fire.mlp(x).movedim(-1, 0))
        assert model(torch.zeros(1, length, dtype=torch.long)).shape == (1, length, 11)


@pytest.fixture(scope="module")
def fire_study(tmp_path_factory):
    cfg = with_overrides(
        get_context_preset("context-smoke"),
        [
            "context=70",
            "dim=8",
            "depth=1",
            "heads=2",
            "steps=2",
            "passkey_only_steps=1",
            "passkey_adjacent_steps=1",
            "batch=2",
            "warmup=0",
            "scales=1,2",
            "depths=2",
            "passkey_samples=1",
            "lm_windows=1",
            "finetune_steps=0",
            "methods=extrapolate",
            "references=fire,cope",
        ],
    )
    out = tmp_path_factory.mktemp("fire")
    run_context(cfg, out)
    return cfg, out


def test_a_stored_model_built_differently_is_retrained_and_its_rows_dropped(fire_study, tmp_path, monkeypatch, caplog):
    cfg, source = fire_study
    out = tmp_path / "study"
    shutil.copytree(source, out)
    store = ContextStore(out / "context.sqlite")
    before = {(r["model"], r["length"], r["metric"], r["depth"]): r["value"] for r in store.rows(cfg.config_id)}
    real_scheme = context_models.study_scheme

    def fire_at_7(c, scheme):  # FIRE built with another threshold than the stored model's
        if scheme != "fire":
            return real_scheme(c, scheme)
        sizes = ModelSizes(dim=c.dim, num_heads=c.heads, head_dim=c.dim // c.heads, max_len=c.context, causal=True)
        return build_from_sizes("fire", sizes, {**FACTORY["fire"].reference.args(c.context), "threshold": 7.0})

    monkeypatch.setattr(context_models, "study_scheme", fire_at_7)
    retrained, real = [], context_train.train_steps
    monkeypatch.setattr(context_train, "train_steps", lambda model, *a: retrained.append(model) or real(model, *a))
    evaluated, evaluate = [], context_evaluate.evaluate_rows
    monkeypatch.setattr(
        context_evaluate, "evaluate_rows", lambda model, *a, **k: evaluated.append(model) or evaluate(model, *a, **k)
    )
    with caplog.at_level(logging.WARNING, logger="posembed.lab.context.train"):
        run_context(cfg, out)
    assert [m.scheme.init_threshold for m in retrained] == [7.0]  # fire only, with the new build
    assert len(evaluated) == len(cfg.lengths) and all(m is retrained[0] for m in evaluated)  # its rows redone
    assert "stored fire" in caplog.text and "retraining it" in caplog.text
    after = {(r["model"], r["length"], r["metric"], r["depth"]): r["value"] for r in store.rows(cfg.config_id)}
    assert after.keys() == before.keys()  # fire re-evaluated, every other row kept
    assert {k: v for k, v in after.items() if k[0] != "fire"} == {k: v for k, v in before.items() if k[0] != "fire"}
    assert store.models(cfg.train_id)["fire"]["checkpoint"].endswith("fire")


def _results(values: dict[tuple[str, str, int, str], float]):
    from posembed.lab.context.store import NO_DEPTH
    from posembed.lab.report.context import Results

    rows = [
        {"model": m, "method": meth, "length": n, "metric": metric, "depth": NO_DEPTH, "value": v}
        for (m, meth, n, metric), v in values.items()
    ]
    return Results(rows, {"context": 96, "finetune_scale": 4, "references": ["alibi", "nope", "fire", "cope"]})


def test_the_report_says_which_reference_stays_flat_and_which_retrieves_past_L():
    from posembed.lab.report.context_results import reference_note, reference_rows

    values = {}
    for model, method, (at_l, at_max), (key_l, key_2x) in (
        ("rope", "yarn", (6.0, 10.3), (1.0, 0.0)),
        ("rope", "extrapolate", (6.0, 38.6), (1.0, 0.0)),
        ("alibi", "none", (7.33, 7.28), (0.0, 0.0)),
        ("nope", "none", (10.4, 11.8), (0.0, 0.0)),
        ("fire", "none", (6.1, 12.0), (1.0, 0.31)),
        ("cope", "none", (6.5, 6.6), (0.9, 0.85)),
    ):
        values |= {
            (model, method, 96, "perplexity"): at_l,
            (model, method, 768, "perplexity"): at_max,
            (model, method, 96, "passkey_mean"): key_l,
            (model, method, 192, "passkey_mean"): key_2x,
            (model, method, 768, "passkey_mean"): 0.0,
        }
    results = _results(values)
    rows = {row["reference"]: row for row in reference_rows(results)}
    assert list(rows) == ["alibi", "nope", "fire", "cope"]  # the study's order and names, not the alphabet
    assert rows["alibi"]["paper"] == "Press et al. 2022 (ICLR)"  # the factory's entry, no table of its own
    assert [rows[n]["perplexity past L"] for n in rows] == [
        "flat (within 5%)",
        "rises",
        "fails (>= 1.5x)",
        "flat (within 5%)",
    ]
    assert rows["fire"]["max passkey past L"] == "0.31 at 2x" and rows["alibi"]["max passkey past L"] == "0"
    assert rows["fire"]["at 8x"] == 12.0 and rows["fire"]["ratio"] == pytest.approx(12.0 / 6.1)
    note = reference_note(results, list(rows.values()))
    assert (
        "Exploratory (means over the seeds, no test): references whose mean perplexity at 8x is within 5% of "
        "their mean at L: alibi, cope."
    ) in note
    assert "Mean perplexity at 8x: references 6.6 to 12; RoPE's methods without fine-tuning 10.3 to 38.6" in note
    assert note.endswith(
        "Passkey past L (each reference's highest mean accuracy over the longer lengths): >= 80% for cope 0.85; above "
        "0 for fire 0.31."
    )
