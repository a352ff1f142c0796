"""The rotation table the reader ships (``interop/rope/rotations.json``) is what ``tools/rope_table.py`` derives from
the installed transformers; the run time reads it without parsing transformers' source, without transformers for a
dict, and a model type it does not know is read from ``rope_interleave`` or named in one warning."""

from __future__ import annotations

import ast
import inspect
import json
import logging
import sys
from pathlib import Path

import pytest

from posembed.interop.rope import model as rope_model
from posembed.interop.rope import table as rope_table
from posembed.interop.rope.settings import layer_settings, read_rope_settings

ROOT = Path(__file__).resolve().parents[2]
SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 256, "rope_theta": 10000.0}


def _pin() -> str:
    """The transformers version constraints.txt pins (the one CI installs and the table is derived from)."""
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return next(line.split("==")[1].strip() for line in lines if line.startswith("transformers=="))


@pytest.fixture(scope="module")
def derived():
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != _pin():
        pytest.skip(
            f"the table is derived from transformers {_pin()} (constraints.txt); {transformers.__version__} is "
            "installed"
        )
    from tools import rope_table as tool

    return tool.derive()


@pytest.mark.xdist_group("test_rope_table:derived")
@pytest.mark.slow
def test_the_shipped_table_is_what_the_tool_derives(derived):
    """CI's ``tools/rope_table.py --check``: the table equals a fresh derivation from the installed transformers."""
    from tools import rope_table as tool

    shipped = json.loads((ROOT / "src/posembed/interop/rope/rotations.json").read_text())
    assert shipped["transformers"] == _pin()
    assert tool.differences(shipped, derived) == []
    assert shipped == rope_table.rotation_table()  # the package reads that file
    assert json.loads(tool.dumps(derived)) == derived


@pytest.mark.xdist_group("test_rope_table:derived")
@pytest.mark.slow
def test_check_names_a_wrong_entry(derived, tmp_path, monkeypatch, capsys):
    """A table whose Cohere entry says halves fails ``--check``, naming the entry."""
    from tools import rope_table as tool

    wrong = json.loads(json.dumps(derived))
    wrong["classes"]["CohereConfig"]["rotation"][0] = "half"
    path = tmp_path / "rotations.json"
    path.write_text(tool.dumps(wrong))
    monkeypatch.setattr(tool, "TABLE", path)
    monkeypatch.setattr(tool, "derive", lambda: derived)
    assert tool.main(["--check"]) == 1
    assert "classes['CohereConfig']: {'rotation': ['half', 'forward', 'first']} shipped" in capsys.readouterr().err
    path.write_text(tool.dumps(derived))
    assert tool.main(["--check"]) == 0


def test_the_table_holds_the_families_that_differ():
    """Adjacent pairs (Cohere, GLM, GPT-J), nanochat's reversed turn, DeepSeek-V4's last channels, DeepSeek-V3's
    switch."""
    assert rope_table.type_rotation("cohere") == rope_table.type_rotation("gptj") == ("interleaved", "forward", "first")
    assert rope_table.type_rotation("llama") == ("half", "forward", "first")
    assert rope_table.type_rotation("nanochat") == ("half", "reversed", "first")
    assert rope_table.type_rotation("deepseek_v4") == ("interleaved", "forward", "last")
    assert rope_table.type_rotation("deepseek_v3") == ("interleaved", "forward", "first")  # its class's default
    assert rope_table.type_rotation("deepseek_v3", interleave=False) == ("half", "forward", "first")
    assert rope_table.class_rotation("Llama4VisionConfig") == ("interleaved", "forward", "first")
    assert rope_table.type_rotation("no such model") is None and rope_table.type_rotation(None) is None


def test_no_module_reads_source():
    """No module of the package parses source or reads it with inspect.getsource (the probes live in tools/)."""
    offenders = []
    for path in (ROOT / "src/posembed").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and (node.attr, getattr(node.value, "id", None)) in {
                ("getsource", "inspect"), ("getsourcelines", "inspect"), ("parse", "ast")
            }:  # fmt: skip
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize("model_type", ["nanochat", "deepseek_v4", "cohere2", "qwen2"])
def test_reading_a_config_reads_no_source(monkeypatch, model_type):
    """With inspect.getsource and ast.parse refusing, a fresh read still gives the model's rotation."""
    pytest.importorskip("transformers")

    calls, real = [], {"getsource": inspect.getsource, "parse": ast.parse}

    def refusing(name):
        def call(obj, *args, **kwargs):  # refused for posembed's callers and transformers' objects; torch's own pass
            caller = sys._getframe(1).f_globals.get("__name__", "")
            owner = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
            if caller.startswith("posembed") or str(owner).startswith("transformers"):
                calls.append((name, caller, str(owner)))
                raise LookupError("source read at run time")
            return real[name](obj, *args, **kwargs)

        return call

    for cached in (rope_table.rotation_table, rope_model.rotary_classes, rope_model.own_position_class):
        cached.cache_clear()
    with monkeypatch.context() as patched:
        patched.setattr(inspect, "getsource", refusing("getsource"))
        patched.setattr(ast, "parse", refusing("parse"))
        try:
            settings = read_rope_settings({"model_type": model_type, **SHAPE})[0]
        except LookupError:
            settings = None
    assert calls == []
    assert (settings.layout, settings.direction, settings.channels) == rope_table.type_rotation(model_type)


@pytest.mark.parametrize(
    ("model_type", "layout"), [("cohere", "interleaved"), ("glm4", "interleaved"), ("llama", "half")]
)
def test_a_dict_reads_the_same_without_transformers(monkeypatch, model_type, layout):
    """The layout of a known model type does not depend on whether transformers is installed."""
    with_transformers = layer_settings({"model_type": model_type, **SHAPE}).layout
    monkeypatch.setattr(rope_model, "_config_class", lambda model_type: None)  # as without transformers
    assert layer_settings({"model_type": model_type, **SHAPE}).layout == with_transformers == layout


def test_an_undeclared_layout_is_named_once(monkeypatch, caplog):
    """A model type the table does not know and whose config sets no rope_interleave: one warning naming it and what
    to pass (not a silent 'half'); a second read does not repeat it."""
    monkeypatch.setattr(rope_table, "_warned", set())
    raw = {"model_type": "brand_new_rope_model", **SHAPE}
    with caplog.at_level(logging.WARNING, logger="posembed"):
        assert layer_settings(raw).layout == "half"
        assert layer_settings(raw).layout == "half"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1, warned
    assert (
        "'brand_new_rope_model'" in warned[0] and "layout='interleaved'" in warned[0] and "rope_interleave" in warned[0]
    )


@pytest.mark.parametrize(("interleave", "layout"), [(True, "interleaved"), (False, "half")])
def test_an_unknown_type_that_declares_rope_interleave_is_read_from_it(monkeypatch, caplog, interleave, layout):
    monkeypatch.setattr(rope_table, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="posembed"):
        assert (
            layer_settings({"model_type": "brand_new_rope_model", **SHAPE, "rope_interleave": interleave}).layout
            == layout
        )
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_a_known_type_reads_without_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="posembed"):
        assert layer_settings({"model_type": "cohere", **SHAPE}).layout == "interleaved"
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("raw", "layout", "head_dim", "rotary_dim", "scheme"),
    [
        ({"model_type": "gptj", "n_embd": 64, "n_head": 4, "rotary_dim": 8, "n_positions": 256},
         "interleaved", 16, 8, None),
        ({"model_type": "codegen", "n_embd": 64, "n_head": 4, "rotary_dim": 8, "n_positions": 256},
         "interleaved", 16, 8, None),
        ({"model_type": "pixtral", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16, "image_size": 64,
          "patch_size": 16}, "half", 16, 16, "rope_pixtral"),
        ({"model_type": "mlcd_vision_model", "hidden_size": 64, "num_attention_heads": 4, "image_size": 64,
          "patch_size": 16}, "half", 16, 16, "rope_axial"),
    ],
)  # fmt: skip
def test_a_family_without_a_default_rotary_class_is_read(raw, layout, head_dim, rotary_dim, scheme):
    """GPT-J and CodeGen (sinusoid tables) and the Pixtral / MLCD towers (axial rotaries only) have no
    ``*RotaryEmbedding`` with ``compute_default_rope_parameters``: the reader reads them from the table and their
    config, not rotary_class's LookupError (which escaped the narrowed except clauses: 23 catalogue pairs refused)."""
    pytest.importorskip("transformers")
    from posembed.interop.rope.axial import axial_class, model_axial_class

    hf = rope_model.transformers_config(raw)
    assert rope_model.model_rotary_class(hf) is None
    with pytest.raises(LookupError, match="has no RotaryEmbedding with compute_default_rope_parameters"):
        rope_model.rotary_class(hf)
    assert (model_axial_class(hf) is None) == (scheme is None)
    if scheme is None:
        with pytest.raises(LookupError, match="compute_axial_rope_parameters or compute_default_rope_parameters"):
            axial_class(hf)
    s = layer_settings(raw)
    assert (s.layout, s.head_dim, s.rotary_dim) == (layout, head_dim, rotary_dim)
    assert (s.axial.scheme if s.axial is not None else None) == scheme
