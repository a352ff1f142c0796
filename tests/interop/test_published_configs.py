"""The corpus of published ``config.json`` files (``tests/interop/published_configs/``, sources in its MANIFEST.json).

Each file is read as ``from_pretrained`` reads it: ``transformers.AutoConfig.for_model(**json)`` builds the config
object (the class's own standardisation of the 4.x spellings runs there), the model's own ``*RotaryEmbedding`` is
built from the language model's (sub-)config, and the catalogue's harness
(:func:`tests.interop.rope_catalogue_compare.compare_layer`) compares it with what ``rotary_from_hf_config`` builds
from the *file* (cos/sin at text positions, M-RoPE's at three rows, q·k through the model's own rotation function).
``posembed rope check`` on the file must find every comparison equal. A file transformers refuses must be refused by
``rope check`` in one line naming what transformers refuses. The headline tests read real files too.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from posembed.cli import main  # noqa: E402 - needs the importorskips above
from posembed.interop.rope.config import rotary_from_hf_config  # noqa: E402 - needs the importorskips above
from posembed.interop.rope_check.check import (  # noqa: E402 - needs the importorskips above
    check_rope_config,
    format_report,
    report_json,
)
from tests.interop.rope_catalogue import catalogue  # noqa: E402 - needs the importorskips above
from tests.interop.rope_catalogue_compare import (  # noqa: E402 - needs the importorskips above
    EXACT,
    compare_layer,
    is_mrope,
    language_model_path,
    layer_types,
    rotary_module,
    sub_config,
)  # fmt: skip

CORPUS = Path(__file__).parent / "published_configs"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8"))
FILES = [entry["file"] for entry in MANIFEST["configs"]]
EXPECTED = {entry["file"]: entry["expected"] for entry in MANIFEST["configs"]}


def _raw(name: str) -> dict:
    return json.loads((CORPUS / name).read_text(encoding="utf-8"))


def _from_pretrained(raw: dict):
    """transformers' config object as ``from_pretrained`` builds it from the file's JSON."""
    return transformers.AutoConfig.for_model(**copy.deepcopy(raw))


def _language_pair(root):
    """The catalogue pair of the model's language-model rotary class, and the sub-config it is built from."""
    path = language_model_path(root) or ""
    sub = sub_config(root, path)
    for model_type, where in ((root.model_type, path), (sub.model_type, "")):
        for pair in catalogue():
            if pair.model_type == model_type and pair.config_path == where:
                return pair, sub
    raise LookupError(f"no catalogue pair for {root.model_type} ({path or 'its own config'})")


def test_the_manifest_names_every_file_once_with_its_source():
    on_disk = sorted(p.name for p in CORPUS.glob("*.json") if p.name != "MANIFEST.json")
    assert sorted(FILES) == on_disk and len(set(FILES)) == len(FILES)
    for entry in MANIFEST["configs"]:
        assert entry["source"]["repo"] and entry["source"]["path"] and entry["family"], entry
        expected = entry["expected"]
        assert expected["reading"] in ("exact", "refused", "gap") and bool(expected.get("reason")) == (
            expected["reading"] != "exact"
        )


@pytest.mark.parametrize("name", FILES)
def test_read_as_the_models_own_rotary_module_reads_it(name):
    raw, expected = _raw(name), EXPECTED[name]
    try:
        root = _from_pretrained(raw)
    except Exception as error:  # noqa: BLE001 - transformers refuses the file: rope check must say so, in one line
        assert expected["reading"] == "refused", (
            f"{name} is stated to read exactly, but transformers refuses it: {error}"
        )
        report = check_rope_config(CORPUS / name)
        refusals = [t for t in report.traps if t.code == "config_refused"]
        assert len(refusals) == 1 and not report.ok, format_report(report)
        message = refusals[0].message
        assert expected["reason"] in message, (expected["reason"], message)
        assert "\n" not in message and repr(raw["model_type"]) in message
        theirs = str(error).splitlines()[0].split(". ")[0]
        assert theirs in message or (
            theirs.startswith("Unrecognized model identifier") and "Unrecognized model identifier" in message
        )
        return
    assert expected["reading"] != "refused", (
        f"{name} is stated to be refused ({expected['reason']}), but transformers builds it"
    )
    if expected["reading"] == "gap":  # a known gap: posembed refuses what transformers builds, with this error
        report = check_rope_config(CORPUS / name)
        errors = [t.message for t in report.traps if t.code == "unbuildable"]
        assert errors and all(expected["reason"] in message for message in errors), format_report(report)
        return
    pair, sub = _language_pair(root)
    module, rotary = rotary_module(pair, sub)
    variants = ["default", *(["mrope3"] if is_mrope(rotary, sub) else [])]
    for variant in variants:
        for layer in layer_types(rotary):
            verdict, why = compare_layer(pair, module, root, sub, rotary, variant, layer, source=CORPUS / name)
            assert verdict == EXACT, f"{pair.key} {variant} {layer}: {verdict} ({why})"
    report = check_rope_config(CORPUS / name)
    assert {layer.settings.layer_type for layer in report.layers} == {layer or "all" for layer in layer_types(rotary)}
    for layer in report.layers:
        assert layer.scheme is not None and layer.comparisons and all(c.equal for c in layer.comparisons), (
            format_report(report)
        )
    assert not [t for t in report.traps if t.severity == "error"], format_report(report)


def test_qwen2_5_vl_as_published_builds_its_m_rope():
    # its file spells rope_scaling {"type": "mrope", "mrope_section": [16, 24, 24]} at the top level, no text_config
    raw = _raw("qwen2.5-vl-7b-instruct.json")
    assert raw["rope_scaling"] == {"type": "mrope", "mrope_section": [16, 24, 24]} and "text_config" not in raw
    scheme = rotary_from_hf_config(raw)
    assert type(scheme).__name__ == "MRoPE" and list(scheme.mrope_section) == [16, 24, 24] and scheme.base == 1e6
    report = check_rope_config(CORPUS / "qwen2.5-vl-7b-instruct.json")
    assert report.ok and not report.traps, format_report(report)
    (layer,) = report.layers
    assert (layer.configured_length, layer.trained_context, layer.effective_context) == (128000, 128000, 128000)


def test_llama_3_1_headline_names_the_configured_length_beside_the_trained_one(capsys):
    path = CORPUS / "llama-3.1-8b-instruct.json"
    (layer,) = check_rope_config(path).layers
    assert (layer.configured_length, layer.trained_context, layer.scaled_context) == (131072, 8192, 65536)
    assert layer.effective_context is None  # the config states none: 8 x 8192 is not its 131072
    assert main(["rope", "check", str(path)]) == 0  # a note for llama3: the official file passes
    out = capsys.readouterr().out
    assert "configured length 131072 (max_position_embeddings)" in out
    assert "trained length    8192 (original_max_position_embeddings in the RoPE parameters)" in out
    assert "stretches the trained 8192 to 65536" in out and "effective context 65536" not in out
    assert re.search(r"NOTE +context_lengths", out) and "max_position_embeddings is 131072" in out
    assert main(["rope", "check", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data["layers"][0]
    assert (
        first["configured_length"],
        first["trained_context"],
        first["scaled_context"],
        first["effective_context"],
    ) == (131072, 8192, 65536, None)
    assert "llama3 x8" in first["scaling"] and [t["code"] for t in data["traps"]].count("context_lengths") == 1


@pytest.mark.parametrize(
    "name", ["llama-3.2-1b-instruct.json", "llama-3.2-3b-instruct.json", "llama-3.1-70b-instruct.json"]
)
def test_every_llama3_scaling_whose_numbers_disagree_is_noted(name):
    report = check_rope_config(CORPUS / name)
    for layer in report.layers:
        assert layer.configured_length == 131072 and layer.trained_context == 8192
        assert layer.scaled_context == 8192 * layer.settings.factor != 131072 and layer.effective_context is None
    assert "context_lengths" in {t.code for t in report.traps}


@pytest.mark.parametrize(
    "name", ["phi-3.5-vision-instruct-text.json", "olmo-3.1-32b-instruct.json", "exaone-4.0-32b.json"]
)
def test_scalings_that_reach_the_configured_length_state_it_as_the_effective_context(name):
    report = check_rope_config(CORPUS / name)
    for layer in report.layers:
        assert layer.effective_context == layer.configured_length == _raw(name)["max_position_embeddings"]
    assert "context_lengths" not in {t.code for t in report.traps}


def test_gemma_3_headline_is_its_configured_length():
    report = check_rope_config(CORPUS / "gemma-3-1b-it.json")
    assert {layer.settings.layer_type for layer in report.layers} == {"sliding_attention", "full_attention"}
    for layer in report.layers:
        assert layer.configured_length == layer.effective_context == 32768 and layer.scaling == "none"
    assert "effective context 32768 (max_position_embeddings)" in format_report(report)


def test_gemma_3_with_linear_scaling_is_headlined_at_its_configured_length(capsys):
    # Gemma 3 27B: {"rope_type": "linear", "factor": 8.0} on full attention, max_position_embeddings 131072 and no
    # trained length; the old headline was "effective context 1048576" (8 x 131072)
    path = CORPUS / "gemma-3-27b-it.json"
    assert _raw(path.name)["text_config"]["rope_scaling"] == {"factor": 8.0, "rope_type": "linear"}
    report = check_rope_config(path)
    full = next(layer for layer in report.layers if layer.settings.layer_type == "full_attention")
    assert full.settings.rope_type == "linear" and full.configured_length == full.effective_context == 131072
    assert full.trained_context is None and full.scaled_context is None and full.scaling.startswith("linear x8")
    assert main(["rope", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1048576" not in out and "effective context 131072 (max_position_embeddings)" in out
    assert "trained length    not stated: linear scaling reads none" in out
    assert "1048576" not in json.dumps(report_json(report))


def test_a_file_that_is_not_utf8_is_named_with_what_was_expected(tmp_path, capsys):
    path = tmp_path / "latin1.txt"
    path.write_bytes('{"model_type": "llama", "name": "caf\u00e9"}'.encode("latin-1"))
    assert main(["rope", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path} is not UTF-8 JSON: byte 0xe9 at offset" in err and "UTF-8 JSON object" in err
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_bytes(path.read_bytes())
    assert main(["rope", "check", str(folder)]) == 2
    assert f"{folder / 'config.json'} is not UTF-8 JSON" in capsys.readouterr().err


@pytest.mark.parametrize("rope_type", ["linear", "yarn", "llama3"])
def test_the_effective_context_is_stated_exactly_where_the_numbers_agree(rope_type):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=20, deadline=None)
    @given(
        original=st.sampled_from([256, 1024, 4096, 8192]),
        factor=st.sampled_from([2.0, 4.0, 8.0, 16.0]),
        stretch=st.sampled_from([0.5, 1.0, 2.0]),
    )
    def check(original, factor, stretch):
        configured = int(original * factor * stretch)
        scaling = {"rope_type": rope_type, "factor": factor, "original_max_position_embeddings": original}
        raw = {
            "model_type": "llama",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "max_position_embeddings": configured,
            "rope_theta": 1e4,
            "rope_scaling": scaling,
        }
        report = check_rope_config(raw, compare=False)
        (layer,) = report.layers
        assert (layer.configured_length, layer.trained_context, layer.scaled_context) == (
            configured,
            original,
            int(original * factor),
        )
        agree = stretch == 1.0
        assert layer.effective_context == (configured if agree else None)
        assert ("context_lengths" in {t.code for t in report.traps}) is not agree

    check()


@pytest.mark.parametrize(
    "raw",
    [
        json.loads((CORPUS / "gpt-j-6b.json").read_text(encoding="utf-8")),
        {"model_type": "codegen", "n_embd": 1024, "n_head": 16, "rotary_dim": 32, "n_positions": 2048},
    ],
)
def test_a_rotary_with_a_table_and_no_init_is_compared_with_its_table(raw):
    # GPT-J's and CodeGen's rotary embeddings hold a sin / cos table (forward returns (sin, cos)) and no rope init
    # function: rope check compares with the angles of that table, where it used to report "rope init failed"
    (layer,) = check_rope_config(raw).layers
    assert layer.comparisons and all(c.equal for c in layer.comparisons), layer.comparison_note
    assert "sin / cos table of transformers'" in layer.comparison_note and "RotaryEmbedding" in layer.comparison_note


def test_remote_code_that_states_no_rope_field_is_refused_not_called_ropeless(capsys):
    # ChatGLM2's config names no RoPE field (its rotation is in its own modeling code) and transformers does not know
    # 'chatglm': rope check says so in one line, where it used to stop at "the config has no RoPE"
    path = CORPUS / "chatglm2-6b.json"
    assert main(["rope", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "transformers does not know model_type 'chatglm'" in out and "the rotation is in that code" in out
    with pytest.raises(ValueError, match="transformers does not know model_type 'chatglm'"):  # no default RoPE guessed
        rotary_from_hf_config(path)  # it used to build full-width RoPE at theta 10000; ChatGLM2 rotates half its head
    bare = {
        "model_type": "",
        "hidden_size": 64,
        "num_attention_heads": 4,
    }  # a sub-config's empty type: defaults, as before
    assert rotary_from_hf_config(bare).base == 1e4
    gpt2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4}  # a type transformers knows, with no RoPE: still an error
    with pytest.raises(ValueError, match=r"the config has no RoPE \(gpt2\)"):
        check_rope_config(gpt2)
