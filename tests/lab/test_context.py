"""Context extension: scheme swap, method schemes, the smoke study end to end, lab extend."""

from __future__ import annotations

import pytest
import torch

from posembed._utils.devices import on_device, resolve_device
from posembed.lab.context import METHODS, longrope_factors, method_scheme, swap_scheme
from posembed.lab.context.corpus import ContextData
from posembed.lab.context.evaluate import evaluate_rows
from posembed.lab.context.extend import reevaluate_checkpoint
from posembed.lab.context.presets import REFERENCES, ContextConfig, get_context_preset, with_overrides
from posembed.lab.context.run import finetuned_name, run_context
from posembed.lab.context.store import ContextStore
from posembed.lab.report.context import Results, write_context_report
from posembed.lab.report.context_verdicts import verdicts
from posembed.lab.training.checkpoint import load_checkpoint, save_checkpoint
from posembed.nn.model.transformer import Decoder
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.bias.t5 import T5RelativeBias
from posembed.schemes.rotary.rope import RotaryEmbedding

L = 16


def _rope_model() -> Decoder:
    torch.manual_seed(0)
    return Decoder(13, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8, max_len=4 * L)).eval()


@pytest.mark.parametrize("method", METHODS)
def test_swapped_model_equals_one_built_with_the_scheme(method):
    model = _rope_model()
    ids = torch.randint(0, 13, (2, 4 * L))
    before = model(ids)
    swapped = swap_scheme(model, method_scheme(method, head_dim=8, factor=4.0, original_len=L))
    reference = Decoder(
        13, dim=16, depth=2, num_heads=2, scheme=method_scheme(method, head_dim=8, factor=4.0, original_len=L)
    )
    reference.load_state_dict(model.state_dict(), strict=True)
    reference.eval()
    assert torch.equal(swapped(ids), reference(ids))
    assert torch.equal(model(ids), before)  # the original keeps its scheme
    assert all(block.attn.scheme is swapped.scheme for block in swapped.blocks)
    assert swapped.state_dict().keys() == model.state_dict().keys()


def test_swap_refuses_what_would_change_the_weights():
    with pytest.raises(ValueError, match="parameters or saved buffers"):
        swap_scheme(_rope_model(), T5RelativeBias(2))
    absolute = Decoder(13, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(32, 16))
    with pytest.raises(ValueError, match="absolute scheme"):
        swap_scheme(absolute, RotaryEmbedding(8))
    with pytest.raises(TypeError, match="rotary or bias"):
        swap_scheme(_rope_model(), LearnedAbsolute(32, 16))


def test_methods_at_factor_one_are_plain_rope_and_longrope_is_plain_within_L():
    plain = RotaryEmbedding(8).cos_sin(torch.arange(L))[0]
    for method in METHODS:
        assert torch.equal(
            method_scheme(method, head_dim=8, factor=1.0, original_len=L).cos_sin(torch.arange(L))[0], plain
        )
    longrope = method_scheme("longrope", head_dim=8, factor=4.0, original_len=L)
    assert torch.allclose(longrope.cos_sin(torch.arange(L))[0] / longrope.attention_scaling, plain)
    factors = longrope_factors(8, 10000.0, 4.0, L)
    assert factors[0] == pytest.approx(1.0) and factors[-1] == pytest.approx(4.0, rel=1e-5)
    with pytest.raises(ValueError, match="unknown context-extension method 'pi'"):
        method_scheme("pi", head_dim=8, factor=2.0, original_len=L)


def test_config_checks_name_the_value():
    with pytest.raises(ValueError, match="context=20 is below the passkey minimum"):
        ContextConfig(name="x", context=20)
    with pytest.raises(ValueError, match="finetune_methods: unknown pi"):
        ContextConfig(name="x", finetune_methods=("pi",))
    with pytest.raises(ValueError, match="steps='a': expected int"):
        with_overrides(get_context_preset("context-smoke"), ["steps=a"])


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    cfg = with_overrides(
        get_context_preset("context-smoke"),
        [
            "context=70",
            "dim=8",
            "depth=1",
            "heads=2",
            "steps=3",
            "passkey_only_steps=1",
            "passkey_adjacent_steps=1",
            "batch=2",
            "warmup=0",
            "scales=1,2",
            "depths=2",
            "passkey_samples=1",
            "lm_windows=1",
            "finetune_steps=2",
            "finetune_scale=2",
            "methods=extrapolate,linear,yarn",
            "finetune_methods=linear,yarn",
            "references=alibi,nope,fire,kerple,sandwich,cope",
        ],
    )
    out = tmp_path_factory.mktemp("context")
    return cfg, out, run_context(cfg, out)


def test_smoke_study_stores_every_evaluation_and_resumes(tiny_study, monkeypatch):
    cfg, out, store_path = tiny_study
    store = ContextStore(store_path)
    rows = store.rows(cfg.config_id)
    evaluations = len(cfg.methods) + len(cfg.references) + len(cfg.finetune_methods)
    per_eval = 1 + cfg.depths + 1  # perplexity, passkey per depth, passkey mean
    assert len(rows) == evaluations * len(cfg.lengths) * per_eval
    # every stored number is what the stored model scores when evaluated again here
    data = ContextData.load(cfg.text)
    # on the device the study ran on (auto): a GPU scores under bf16 autocast, the CPU in fp32
    rope = load_checkpoint(out / "models" / cfg.train_id / "rope", device=resolve_device("auto"))[0]
    for length in cfg.lengths:
        windows = cfg.lm_windows * max(cfg.lengths) // length
        again = evaluate_rows(
            on_device(rope),
            data,
            length,
            windows=windows,
            depths=cfg.depths,
            samples=cfg.passkey_samples,
            seed=cfg.seed,
            digits=cfg.digits,
        )
        stored = {
            (r["metric"], r["depth"]): r["value"]
            for r in rows
            if (r["model"], r["method"], r["length"]) == ("rope", "extrapolate", length)
        }
        assert stored == {(m, d): pytest.approx(v, rel=1e-6) for m, d, v in again}
    for r in rows:  # perplexities of 3-step models: above 1, near the vocabulary's size; accuracies one sample each
        if r["metric"] == "perplexity":
            assert 1.0 < r["value"] < 2 * data.vocab_size
        else:
            assert r["value"] in (0.0, 0.5, 1.0) and (r["metric"] == "passkey_mean" or r["value"] in (0.0, 1.0))
    assert set(store.models(cfg.train_id)) == {
        "rope",
        *REFERENCES,
        *(finetuned_name(m, 2) for m in cfg.finetune_methods),
    }
    import posembed.lab.context.evaluate as context_evaluate
    import posembed.lab.context.train as context_train

    monkeypatch.setattr(context_train, "train_steps", lambda *a: pytest.fail("a stored model was retrained"))
    monkeypatch.setattr(
        context_evaluate, "evaluate_rows", lambda *a, **k: pytest.fail("a stored evaluation was redone")
    )
    run_context(cfg, out)
    assert store.rows(cfg.config_id) == rows


def test_report_renders_markdown_html_and_verdicts(tiny_study):
    cfg, out, store_path = tiny_study
    markdown, html = write_context_report(store_path, out / "report")
    text = markdown.read_text()
    assert text.startswith(
        "## posembed lab context: Which context extension works? (context-smoke)\n\n> **Warning:** This study is too "
        "small to conclude: the 'context-smoke' preset trains tiny models for 3 steps to test the pipeline; "
        "it has one seed, so no number has an interval. No verdict below is a finding"
    )
    order = [
        text.index(h)
        for h in (
            "### Summary",
            "### Verdicts against",
            "### Where the published figures",
            "### Passkey accuracy",
            "### The references past L",
            "### Held-out perplexity",
        )
    ]
    assert order == sorted(order)
    assert "- [Without fine-tuning, YaRN beats linear interpolation at the longest length: cannot tell (1 seed)" in text
    assert "rope / yarn" in text and "rope+linear@2x" in text and "| fire |" in text and "| cope |" in text
    assert "rope, alibi, nope, fire, kerple, sandwich and cope decoders" in text and "1 seed (0)" in text
    # the notes describe this run, not the full preset
    assert "This run: 1 seed (0), width 8, 1 layers, 3 steps at L = 70, fine-tuned 2 steps at 2x" in text
    assert "at the context preset (seed 0)" not in text
    page = html.read_text()
    assert (
        page.index('class="banner"')
        < page.index('id="summary"')
        < page.index('id="verdicts"')
        < page.index('id="perplexity"')
        and '<a href="#verdicts">' in page
        and "context_perplexity" in page
    )
    assert (out / "report" / "context_perplexity.png").is_file()
    rows = verdicts(Results.load(store_path))
    assert {row["verdict"] for row in rows} <= {
        "cannot tell (1 seed)",
        "not measured",
        "not testable (both retrieve nothing)",
    }
    assert {row["seeds"] for row in rows} <= {0, 1}


def test_extend_a_study_checkpoint_with_finetuning(tiny_study, tmp_path):
    cfg, out, _ = tiny_study
    folder = out / "models" / cfg.train_id / "rope"
    rows = reevaluate_checkpoint(
        folder, "yarn", 2.0, finetune_steps=1, batch=2, windows=1, depths=2, samples=1, save_to=tmp_path / "ext"
    )
    assert {r["length"] for r in rows} == {70, 140}
    assert {r["metric"] for r in rows} == {"perplexity", "passkey", "passkey_mean"}
    model, meta = load_checkpoint(tmp_path / "ext")
    assert type(model.scheme).__name__ == "YaRNRotary" and meta["config"]["context"] == 140


def test_extend_a_plain_charlm_lab_checkpoint(tmp_path):
    from posembed.lab.tasks.charlm import load_corpus

    corpus = load_corpus("tinyshakespeare", L)
    model = Decoder(corpus.vocab_size, dim=8, depth=1, num_heads=2, scheme=RotaryEmbedding(4, max_len=8 * L))
    save_checkpoint(
        model, tmp_path, {"task": "charlm", "config": {"task": "charlm", "context": L, "text": "tinyshakespeare"}}
    )
    rows = reevaluate_checkpoint(tmp_path, "linear", 4.0, windows=1)
    assert [(r["length"], r["metric"]) for r in rows] == [(L, "perplexity"), (4 * L, "perplexity")]
    with pytest.raises(ValueError, match=r"factor must be a finite number >= 1.0, got 0.5"):
        reevaluate_checkpoint(tmp_path, "linear", 0.5)


def test_method_schemes_are_built_and_checked_by_the_factory(monkeypatch):
    import re

    from posembed.lab.context import methods
    from posembed.schemes.factory import FACTORY, METHOD_SCHEMES

    built, real = [], methods.build_from_kwargs
    monkeypatch.setattr(methods, "build_from_kwargs", lambda name, kwargs: built.append(name) or real(name, kwargs))
    for method in METHODS:
        built.clear()
        scheme = method_scheme(method, head_dim=8, factor=4.0, original_len=L)
        assert type(scheme) is FACTORY[METHOD_SCHEMES[method]].cls and built[-1] == METHOD_SCHEMES[method]
    built.clear()
    assert type(method_scheme("yarn", head_dim=8, factor=1.0, original_len=L)) is RotaryEmbedding
    assert built == [METHOD_SCHEMES["extrapolate"]]  # factor 1: plain RoPE, from the factory too
    yarn = METHOD_SCHEMES["yarn"]
    with pytest.raises(ValueError, match=re.escape(f"scheme {yarn!r} argument 'head_dim' must be an integer, got 8.0")):
        method_scheme("yarn", head_dim=8.0, factor=2.0, original_len=L)
