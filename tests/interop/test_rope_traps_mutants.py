"""Pins of ``rope check``'s traps that the other trap tests let through: each test kills mutants of
``interop/rope_check/traps.py`` (``python tools/mutate.py rope_traps``), through the public functions
only (:func:`posembed.interop.rope_check.check.check_rope_config`,
:func:`~posembed.interop.rope_check.traps.yarn_default_attention`): boundaries (``<`` against ``<=``), the numbers
the messages state, which branch a config takes."""

from __future__ import annotations

import math

import pytest

from posembed.interop.rope_check.check import check_rope_config
from posembed.interop.rope_check.traps import yarn_default_attention


def found(raw: dict, code: str | None = None) -> list[tuple[str, str, str, str]]:
    """``(code, severity, layer type, message)`` of every trap, in the order the check gives them."""
    return [
        (t.code, t.severity, t.layer_type, t.message)
        for t in check_rope_config(raw, compare=False).traps
        if code is None or t.code == code
    ]


def messages(raw: dict, code: str) -> list[str]:
    return [message for _, _, _, message in found(raw, code)]


def llama(**fields) -> dict:
    return {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
        **fields,
    }


def yarn(factor=4.0, **params) -> dict:
    return llama(
        rope_scaling={"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 256, **params}
    )


def plain(s: float) -> float:
    return 0.1 * math.log(s) + 1.0


def test_yarn_default_attention_is_one_up_to_factor_one_then_0_1_ln_s_plus_1():
    assert yarn_default_attention(0.5) == 1.0 and yarn_default_attention(1.0) == 1.0
    assert yarn_default_attention(1.5) == pytest.approx(1.0 + 0.1 * math.log(1.5), rel=1e-15)
    assert yarn_default_attention(math.e) == pytest.approx(1.1, rel=1e-15)
    assert yarn_default_attention(4.0) == pytest.approx(1.1386294361119891, rel=1e-15)


def test_the_yarn_note_states_a_and_a_squared():
    (note,) = messages(yarn(), "yarn_attention")
    assert note.startswith(
        f"YaRN's attention factor a (default 0.1 ln s + 1 = {plain(4):.6g}) multiplies cos and sin, "
        f"which rotate q and k both, so the logits scale by a^2 = {plain(4) ** 2:.6g};"
    )
    assert "= 1.13863)" in note and "a^2 = 1.29648;" in note


def test_an_attention_factor_already_squared_is_a_warning_within_a_tenth_of_a_permille():
    assert messages(yarn(attention_factor=plain(4) ** 2), "yarn_squared") == [
        "attention_factor=1.29648 is (0.1 ln s + 1)^2: folded into cos and sin it is applied to q and k, so the "
        "logits would scale by its square again (a^4)"
    ]
    assert messages(yarn(attention_factor=plain(4) ** 2 * (1 + 0.9e-4)), "yarn_squared")
    assert not messages(yarn(attention_factor=plain(4) ** 2 * (1 + 1.5e-4)), "yarn_squared")
    assert not messages(yarn(attention_factor=plain(4)), "yarn_squared")
    # at factor 1 the plain factor is 1 = its square: an attention factor 1 is no square of anything
    assert not messages(yarn(factor=1.0, attention_factor=1.0), "yarn_squared")


def test_deepseek_mscale_pairs_state_the_rotary_ratio_and_the_softmax_factor():
    (note,) = found(yarn(mscale=0.707, mscale_all_dim=1.0), "yarn_mscale")

    def m(s, k):  # DeepSeek's get_mscale for s > 1
        return 0.1 * k * math.log(s) + 1.0

    assert note[1] == "note" and note[3] == (
        f"DeepSeek mscale=0.707, mscale_all_dim=1.0: the rotary factor is get(s, mscale) / get(s, mscale_all_dim) = "
        f"{m(4, 0.707) / m(4, 1.0):.6g} instead of the plain {plain(4):.6g}; DeepSeek also multiplies its softmax "
        f"scale by get(s, mscale_all_dim)^2 = {m(4, 1.0) ** 2:.6g} in attention - keep that, and do not add the plain "
        f"factor on top"
    )
    assert "= 0.964327 instead of the plain 1.13863" in note[3] and "^2 = 1.29648 in" in note[3]
    (at_2,) = messages(yarn(factor=2.0, mscale=0.5, mscale_all_dim=2.0), "yarn_mscale")
    assert f"= {m(2, 0.5) / m(2, 2.0):.6g} instead" in at_2 and f"^2 = {m(2, 2.0) ** 2:.6g} in" in at_2
    (at_1_5,) = messages(yarn(factor=1.5, mscale=1.0, mscale_all_dim=3.0), "yarn_mscale")
    assert f"^2 = {m(1.5, 3.0) ** 2:.6g} in" in at_1_5  # get_mscale is 1 only up to s = 1
    (at_1,) = messages(yarn(factor=1.0, mscale=0.5, mscale_all_dim=2.0), "yarn_mscale")
    assert "= 1 instead of the plain 1;" in at_1 and "^2 = 1 in attention" in at_1


@pytest.mark.parametrize("mscale, all_dim", [(1.0, None), (None, 1.0)])
def test_one_mscale_alone_is_a_warning(mscale, all_dim):
    params = {k: v for k, v in (("mscale", mscale), ("mscale_all_dim", all_dim)) if v is not None}
    assert found(yarn(**params), "yarn_mscale") == [
        (
            "yarn_mscale",
            "warning",
            "all",
            f"DeepSeek mscale={mscale}, mscale_all_dim={all_dim}: only one of mscale / mscale_all_dim is set: "
            f"transformers then ignores it and uses the plain 0.1 ln s + 1 = {plain(4):.6g}, while DeepSeek's code "
            "would not",
        )
    ]


def test_an_attention_factor_beside_mscale_overrides_it():
    override = "attention_factor is set together with mscale: it overrides them"
    assert override in messages(yarn(attention_factor=1.2, mscale_all_dim=1.0), "yarn_mscale")
    assert override in messages(yarn(attention_factor=1.2, mscale=1.0), "yarn_mscale")
    assert not messages(yarn(attention_factor=1.2), "yarn_mscale")
    assert override not in messages(yarn(mscale=1.0, mscale_all_dim=1.0), "yarn_mscale")


def dynamic(original: int | None) -> dict:
    params = {} if original is None else {"original_max_position_embeddings": original}
    return llama(rope_scaling={"rope_type": "dynamic", "factor": 2.0, **params})


def test_dynamic_warns_for_any_stated_original_other_than_its_max():
    assert messages(dynamic(512), "dynamic_original") == [
        "original_max_position_embeddings=512 is set, but dynamic NTK takes max_position_embeddings=1024 as the "
        "trained length: frequencies change only past 1024"
    ]
    assert len(messages(dynamic(2048), "dynamic_original")) == 1
    assert not messages(dynamic(1024), "dynamic_original") and not messages(dynamic(None), "dynamic_original")
    assert messages(dynamic(None), "dynamic_formula")[0].startswith(
        "dynamic NTK: for a call of length l > L = max_position_embeddings = 1024, the base becomes"
    )


def longrope(short: int, long: int) -> dict:
    return {
        "model_type": "phi3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 1024,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0] * short, "long_factor": [1.0] * long},
    }


def test_longrope_factors_need_exactly_half_the_rotary_dim():
    assert messages(longrope(8, 7), "longrope_factors") == ["long_factor has 7 values; rotary_dim / 2 = 8 are needed"]
    assert messages(longrope(9, 8), "longrope_factors") == ["short_factor has 9 values; rotary_dim / 2 = 8 are needed"]
    assert not messages(longrope(8, 8), "longrope_factors")
    assert messages(longrope(8, 8), "longrope_switch")[0].startswith(
        "LongRoPE uses short_factor while the sequence (largest position + 1) is at most 1024 and long_factor beyond"
    )


def llama3(**params) -> dict:
    scaling = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 256, **params}
    return llama(rope_theta=500000.0, vocab_size=128256, rope_scaling=scaling)


def test_llama3_bounds():
    assert found(llama3(low_freq_factor=1.0, high_freq_factor=4.0), "llama3_bounds") == [
        (
            "llama3_bounds",
            "note",
            "all",
            "llama3: wavelengths above original / low_freq_factor = 256 are interpolated (x8), those below original / "
            "high_freq_factor = 64 kept, a smooth ramp between",
        )
    ]
    assert "= 512 are interpolated" in messages(llama3(low_freq_factor=0.5, high_freq_factor=4.0), "llama3_bounds")[0]
    missing = "llama3 scaling needs low_freq_factor and high_freq_factor"
    assert messages(llama3(low_freq_factor=1.0), "llama3_bounds") == [missing]
    assert messages(llama3(high_freq_factor=4.0), "llama3_bounds") == [missing]
    for low, high in ((4.0, 1.0), (-1.0, 4.0)):  # low 0: check_rope_config fails building it
        assert found(llama3(low_freq_factor=low, high_freq_factor=high), "llama3_bounds") == [
            (
                "llama3_bounds",
                "error",
                "all",
                f"llama3 needs 0 < low_freq_factor <= high_freq_factor, got {low:g} and {high:g}",
            )
        ], (low, high)
    # equal bounds (Llama 4 Scout's 1 and 1): a step, which transformers builds: a note, not an error
    assert [t[1] for t in found(llama3(low_freq_factor=2.0, high_freq_factor=2.0), "llama3_bounds")] == ["note"]


def test_theta_against_the_family():
    assert found(llama(rope_theta=1e6)) == [
        (
            "theta_family",
            "warning",
            "all",
            "rope_theta=1e+06 but llama checkpoints use 10000 or 500000: was it lost in a conversion (a loader default "
            "filled in)?",
        )
    ]
    assert not found(llama(rope_theta=500000.0))  # a Llama 3 theta on a "llama" config
    # the Llama 3 vocabulary (or rope_type llama3) makes a "llama" config a Llama 3 one
    assert messages(llama(vocab_size=128256), "theta_family") == [
        "rope_theta=10000 but llama3 checkpoints use 500000: was it lost in a conversion (a loader default filled in)?"
    ]
    assert not found(llama(vocab_size=128000))
    assert messages(
        llama3(low_freq_factor=1.0, high_freq_factor=4.0) | {"vocab_size": 100, "rope_theta": 10000.0}, "theta_family"
    )[0].startswith("rope_theta=10000 but llama3 checkpoints use 500000")
    assert not found({**llama(rope_theta=123.0), "model_type": "phi"}, "theta_family")  # no family's theta known
    mistral = {**llama(rope_theta=123.0), "model_type": "mistral"}
    assert messages(mistral, "theta_family") == [
        "rope_theta=123 but mistral checkpoints use 10000 or 1e+06: was it lost in a conversion (a loader default "
        "filled in)?"
    ]


def test_a_missing_theta_says_who_fills_it_in():
    no_theta = {k: v for k, v in llama().items() if k != "rope_theta"}
    assert found(no_theta) == [
        (
            "theta_missing",
            "note",
            "all",
            "the config states no RoPE field: transformers' llama config class fills in its own, rope_type 'default' "
            "at rope_theta 10000",
        )
    ]
    mixtral = {"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 1024}
    assert messages(mixtral, "theta_missing") == [
        "the config states no RoPE field: transformers' mixtral config class fills in its own, rope_type 'default' at "
        "rope_theta 1e+06; a loader without that class would take 10000"
    ]
    unknown = {
        "model_type": "foo_bar",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 1024,
        "rope_parameters": {"rope_type": "default"},
    }
    assert found(unknown, "theta_missing") == [
        (
            "theta_missing",
            "note",
            "all",
            "rope_theta is absent: the default 10000 applies, unless the model's own config class fills in another",
        )
    ]
    assert [code for code, *_ in found(unknown)] == [
        "config_refused",
        "theta_missing",
    ]  # a type transformers does not know
    gemma3 = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
    }
    assert found(gemma3) == [
        (
            "theta_family",
            "warning",
            "full_attention",
            "rope_theta=10000 but gemma3_text checkpoints use 1e+06: was it "
            "lost in a conversion (a loader default filled in)?",
        ),
        (
            "theta_missing",
            "note",
            "sliding_attention",
            "rope_theta is absent: transformers' gemma3_text config class fills in 10000 for sliding_attention",
        ),
    ]


def test_theta_per_layer_type_only_where_they_differ():
    def gemma3(full: float, sliding: float) -> dict:
        return {
            "model_type": "gemma3_text",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "head_dim": 16,
            "max_position_embeddings": 1024,
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": full},
                "sliding_attention": {"rope_type": "default", "rope_theta": sliding},
            },
        }

    assert found(gemma3(1e6, 1e4)) == [
        (
            "theta_per_layer",
            "note",
            "*",
            "theta differs per layer type (full_attention 1e+06, sliding_attention 10000): a stack that reads only "
            "rope_theta gives every layer one of them",
        )
    ]
    assert not found(gemma3(1e4, 1e4), "theta_per_layer") and not found(llama(), "theta_per_layer")


def test_linear_and_default_factors():
    linear = llama(rope_scaling={"rope_type": "linear", "factor": 4.0})
    assert found(linear) == [
        (
            "original_missing",
            "note",
            "all",
            "linear scaling names no trained length: it divides every position by 4 whatever length the model was "
            "trained at; max_position_embeddings=1024 is the configured length (trained at 1024 / 4 = 256 if it is "
            "already extended)",
        )
    ]
    assert not found(llama(rope_scaling={"rope_type": "linear", "factor": 1.0}), "original_missing")
    (small,) = messages(llama(rope_scaling={"rope_type": "linear", "factor": 1.5}), "original_missing")
    assert small.startswith("linear scaling names no trained length: it divides every position by 1.5 whatever")
    unread = (
        "is set, but {how}: default RoPE reads no factor, so transformers builds plain RoPE (it only logs "
        "\"Unrecognized keys in `rope_parameters` for 'rope_type'='default': {{'factor'}}\") and nothing is "
        "extended; name the scaling the factor is for (rope_type 'linear', 'dynamic', 'yarn', ...)"
    )
    stated = llama(rope_scaling={"rope_type": "default", "factor": 4.0})
    assert messages(stated, "factor_unread") == ["factor=4 " + unread.format(how="rope_type is 'default'")]
    bare = llama(rope_scaling={"factor": 2.0})
    assert messages(bare, "factor_unread") == ["factor=2 " + unread.format(how="the RoPE parameters name no rope_type")]
    assert not found(llama(rope_scaling={"rope_type": "default", "factor": 1.0}), "factor_unread")
    assert not found(llama(rope_scaling={"rope_type": "default"}), "factor_unread")


def test_the_old_type_key_beside_rope_type():
    both = yarn() | {"rope_scaling": {**yarn()["rope_scaling"], "type": "linear"}}
    assert found(both, "type_ignored") == [
        (
            "type_ignored",
            "warning",
            "all",
            "the RoPE parameters name their type with the old key 'type' ('linear') beside rope_type 'yarn': "
            "transformers builds 'yarn' and ignores 'type'; write rope_type",
        )
    ]
    same = yarn() | {"rope_scaling": {**yarn()["rope_scaling"], "type": "yarn"}}
    assert not found(same, "type_ignored") and not found(yarn(), "type_ignored")


def test_old_longrope_names_on_phi3():
    su = longrope(8, 8)
    su["rope_scaling"]["type"] = "su"
    (trap,) = found(su, "config_refused")  # renamed only after standardising, which fills in no length for 'su'
    assert trap[:3] == ("config_refused", "error", "*") and trap[3].startswith(
        "transformers' phi3 config class refuses this config (KeyError: "
    )
    assert not found(su, "renamed_longrope")  # read as written: 'su', which posembed does not build
    assert found(su, "unbuildable")[0][3].startswith("posembed cannot build this RoPE: unknown rope_type 'su'")
    su["rope_scaling"]["original_max_position_embeddings"] = 1024
    assert found(su, "renamed_longrope") == [
        (
            "renamed_longrope",
            "note",
            "all",
            "rope type 'su' is an old name of LongRoPE: transformers' phi3 config class renames it longrope "
            "(short_factor / long_factor); posembed reads it so",
        )
    ]
    assert not found(su, "type_ignored")  # the old name is the rename's, not an ignored type
    assert not found(longrope(8, 8), "renamed_longrope")  # already longrope
    assert not found(yarn(), "renamed_longrope")  # YaRN of a class that does not rename it stays YaRN


def test_phimoe_scales_cos_and_sin_by_its_mscales_in_forward():
    config = longrope(8, 8) | {"model_type": "phimoe"}
    config["rope_scaling"] = {**config["rope_scaling"], "short_mscale": 1.1, "long_mscale": 1.2}
    (trap,) = found(config, "mscale_forward")
    assert (
        trap[1] == "warning"
        and (
            "its forward calls that function again without the sequence length, so it always takes short_factor, never "
            "long_factor, and multiplies cos and sin by short_mscale=1.1 (sequences up to "
            "original_max_position_embeddings=4096) or long_mscale=1.2 (longer)"
        )
        in trap[3]
    )
    assert not found({**llama(), "model_type": "phimoe"}, "mscale_forward")
    assert not found(longrope(8, 8), "mscale_forward")


def test_two_different_original_lengths_say_which_one_is_built():
    top_and_params = yarn() | {"original_max_position_embeddings": 512}
    assert found(top_and_params, "original_inconsistent") == [
        (
            "original_inconsistent",
            "warning",
            "all",
            "original_max_position_embeddings is 256 in the RoPE parameters but 512 at the top level; transformers "
            "builds the model with the top-level 512: its config keeps it as an attribute, and standardising the RoPE "
            "parameters (at construction for a class that declares the field, when the model is built for any other) "
            "overwrites theirs with it",
        )
    ]
    assert not found(yarn() | {"original_max_position_embeddings": 256}, "original_inconsistent")
    linear = llama(
        original_max_position_embeddings=512,
        rope_scaling={"rope_type": "linear", "factor": 4.0, "original_max_position_embeddings": 256},
    )
    assert messages(linear, "original_inconsistent") == [
        "original_max_position_embeddings is 256 in the RoPE parameters but 512 at the top level; rope_type 'linear' "
        "reads neither"
    ]


def test_a_missing_original_and_a_max_that_looks_extended():
    def bare_yarn(max_pos: int, factor: float) -> dict:
        return llama(max_position_embeddings=max_pos, rope_scaling={"rope_type": "yarn", "factor": factor})

    head = "rope_type 'yarn' has no original_max_position_embeddings: loaders take max_position_embeddings="
    assert messages(bare_yarn(32768, 4.0), "original_missing") == [
        f"{head}32768 as the trained length; max_position_embeddings=32768 = 4 x 8192 looks already extended, so the "
        f"factor would compound to 4^2 (effective context 131072)"
    ]
    assert messages(bare_yarn(1000, 3.0), "original_missing") == [f"{head}1000 as the trained length"]  # 1000 / 3
    assert messages(bare_yarn(1024, 1.0), "original_missing") == [f"{head}1024 as the trained length"]  # factor 1
    (at_1_5,) = messages(bare_yarn(3000, 1.5), "original_missing")
    assert at_1_5.endswith(
        "= 1.5 x 2000 looks already extended, so the factor would compound to 1.5^2 (effective context 4500)"
    )


def test_original_against_max_position_embeddings():
    def stated(max_pos: int) -> dict:
        return yarn() | {"max_position_embeddings": max_pos}

    assert messages(stated(128), "original_inconsistent") == [
        "original_max_position_embeddings=256 exceeds max_position_embeddings=128"
    ]
    assert messages(stated(256), "factor_compounds") == [
        "original_max_position_embeddings equals max_position_embeddings (256) with factor 4: either "
        "max_position_embeddings was not raised to 4 x 256, or the 'original' is itself an extended length and the "
        "factor compounds an earlier extension"
    ]
    assert not messages(stated(256), "original_inconsistent")
    for max_pos in (257, 1024):
        assert not found(stated(max_pos), "factor_compounds") and not found(stated(max_pos), "original_inconsistent")
    # factor 1 extends nothing: no comparison
    assert not found(yarn(factor=1.0) | {"max_position_embeddings": 128}, "original_inconsistent")
    # dynamic NTK whose max is factor x its original compounds (it scales from max_position_embeddings)
    (compounds,) = messages(dynamic(512), "factor_compounds")
    assert compounds.startswith(
        "max_position_embeddings=1024 is already factor x original_max_position_embeddings "
        "(2 x 512), but dynamic NTK scales from max_position_embeddings"
    )
    assert "toward 2 x 1024 = 2048, so the factor compounds to 2^2" in compounds
    assert not found(dynamic(256), "factor_compounds") and not found(dynamic(2048), "factor_compounds")


def test_longrope_factor_against_max_over_original():
    def stated(factor: float) -> dict:
        config = longrope(8, 8)
        config["rope_scaling"] = {**config["rope_scaling"], "factor": factor}
        return config

    assert messages(stated(2.0), "original_inconsistent") == [
        "LongRoPE factor=2 but max_position_embeddings / original = 4: the attention factor follows 'factor' when "
        "given, the ratio otherwise"
    ]
    assert not found(stated(4.0), "original_inconsistent")
    assert not found(stated(4.0 * (1 + 0.9e-3)), "original_inconsistent")  # within a permille
    assert found(stated(4.0 * (1 + 1.5e-3)), "original_inconsistent")
    assert not found(longrope(8, 8), "original_inconsistent")  # no factor stated


def neox(hidden: int, pct: float) -> dict:
    return {
        "model_type": "gpt_neox",
        "hidden_size": hidden,
        "num_attention_heads": 4,
        "max_position_embeddings": 1024,
        "rotary_pct": pct,
        "rope_theta": 10000.0,
    }


def test_partial_rotary_states_the_rotated_and_passed_channels():
    pairs = "(i, i + r/2) (half layout; not (i, i + D/2), not GPT-J's interleaved (2i, 2i + 1))"
    assert found(neox(64, 0.25), "partial_rotary") == [
        (
            "partial_rotary",
            "note",
            "all",
            f"partial rotary: 0.25 x head_dim 16 = 4 -> rotary_dim r = 4; channels 0..3 rotate in pairs {pairs}, the "
            "other 12 pass through",
        )
    ]
    # 0.3 x 16 = 4.8 is no whole channel count: a warning; 0.25 x 12 = 3 is odd, and transformers' NeoX rotary
    # computes ceil(3 / 2) = 2 frequencies, so 4 channels rotate (the width its cos/sin have): a note saying so
    assert found(neox(64, 0.3), "partial_rotary")[0][1:3] == ("warning", "all")
    assert found(neox(48, 0.25), "partial_rotary") == [
        (
            "partial_rotary",
            "note",
            "all",
            f"partial rotary: 0.25 x head_dim 12 = 3 -> rotary_dim r = 4; channels 0..3 rotate in pairs {pairs}, the "
            "other 8 pass through",
        )
    ]
    assert not found(neox(64, 1.0), "partial_rotary")
    gptj = {"model_type": "gptj", "n_embd": 64, "n_head": 4, "rotary_dim": 6, "n_positions": 1024}
    assert messages(gptj, "partial_rotary") == [
        "partial rotary: 0.375 x head_dim 16 = 6 -> rotary_dim r = 6; channels 0..5 rotate in pairs (2i, 2i + 1) "
        "(interleaved layout; not (i, i + D/2), not NeoX's halves (i, i + r/2)), the other 10 pass through"
    ]


def test_head_dim_notes():
    def given(head_dim: int) -> dict:
        return llama(head_dim=head_dim)

    assert found(given(32), "head_dim") == [
        (
            "head_dim",
            "note",
            "all",
            "head_dim=32 is not hidden_size / num_attention_heads = 64 / 4 = 16: a stack that derives it rotates the "
            "wrong width",
        )
    ]
    assert messages(given(8), "head_dim") == [
        "head_dim=8 is not hidden_size / num_attention_heads = 64 / 4 = 16: a stack that derives it rotates the wrong "
        "width"
    ]
    assert not found(given(16), "head_dim")
    odd = llama(hidden_size=66)  # 66 // 4 = 16 is what the reader derives: no note (66 / 4 = 16.5 is no head dim)
    assert not found(odd, "head_dim")
    assert messages(llama(hidden_size=66, head_dim=16), "head_dim") == [
        "head_dim=16 is not hidden_size / num_attention_heads = 66 / 4 = 16.5: a stack that derives it rotates the "
        "wrong width"
    ]
    gemma = {
        "model_type": "gemma",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
    }
    assert found(gemma, "head_dim") == [
        (
            "head_dim",
            "note",
            "all",
            "head_dim is absent: transformers' gemma config class fills in its default 256, not hidden_size // "
            "num_attention_heads = 16: a stack that derives it rotates the wrong width",
        )
    ]
    wide = gemma | {"hidden_size": 4096, "num_attention_heads": 8}  # its default 256 is below 4096 // 8 = 512
    assert messages(wide, "head_dim") == [
        "head_dim is absent: transformers' gemma config class fills in its default 256, not hidden_size // "
        "num_attention_heads = 512: a stack that derives it rotates the wrong width"
    ]


def test_numbers_written_as_strings_are_errors_naming_the_field_and_its_layer():
    assert found(llama(rope_theta="10000"), "not_a_number") == [
        (
            "not_a_number",
            "error",
            "*",
            "rope_theta is '10000', a str, not a number: transformers does not convert it, so its config class or its "
            "rope init fails on it; write 10000.0 without quotes",
        )
    ]
    gemma3 = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 1024,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": "1e6"},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    }
    assert found(gemma3, "not_a_number") == [
        (
            "not_a_number",
            "error",
            "full_attention",
            "rope_parameters.full_attention.rope_theta is '1e6', a str, not a number: transformers does not convert "
            "it, so its config class or its rope init fails on it; write 1000000.0 without quotes (YAML 1.1 reads 1e6 "
            "as a string: write 1.0e+06 there)",
        )
    ]
    flat = yarn(factor="4.0")
    assert found(flat, "not_a_number") == [
        (
            "not_a_number",
            "error",
            "*",
            "rope_scaling.factor is '4.0', a str, not a number: transformers does not convert it, so its config class "
            "or its rope init fails on it; write 4.0 without quotes",
        )
    ]


def test_parameters_nested_like_layer_types_that_transformers_ignores():
    flat = llama(
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "full_attention": {"rope_type": "default"}}
    )
    del flat["rope_theta"]
    assert found(flat, "parameters_ignored") == [
        (
            "parameters_ignored",
            "warning",
            "*",
            "the RoPE parameters nest full_attention like layer types, but transformers' llama config class has no "
            "layer_types: transformers reads the parameters as flat, ignores full_attention and builds default RoPE "
            "with theta 10000; posembed's builder refuses such a config",
        )
    ]
    layers = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 1024,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "chunked_attention": {"rope_type": "default"},
        },
    }
    assert messages(layers, "parameters_ignored") == [
        "the RoPE parameters hold chunked_attention beside the layer types the config has (full_attention, "
        "sliding_attention): transformers ignores it"
    ]
    layers["rope_parameters"]["other_attention"] = {"rope_type": "default"}
    assert messages(layers, "parameters_ignored")[0].endswith("transformers ignores them")


def test_errors_come_first_then_warnings_then_notes():
    severities = [severity for _, severity, _, _ in found(longrope(8, 7) | {"rope_theta": "123"})]
    assert severities == sorted(severities, key=["error", "warning", "note"].index)
    assert severities[0] == "error" and severities[-1] == "note" and "warning" in severities


def test_latent_attention_rotates_qk_rope_head_dim():
    deepseek = {
        "model_type": "deepseek_v3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "kv_lora_rank": 16,
        "q_lora_rank": 16,
    }
    assert found(deepseek, "head_dim") == [
        (
            "head_dim",
            "note",
            "all",
            "multi-head latent attention: transformers' deepseek_v3 config class sets head_dim = qk_rope_head_dim = 8 "
            "and rotates 8 channels of each head (interleaved layout), not hidden_size // num_attention_heads = 16: a "
            "stack that derives it rotates the wrong width",
        )
    ]


def test_phi3_yarn_is_an_old_longrope_name_not_yarn():
    config = longrope(8, 8)
    config["rope_scaling"] = {**config["rope_scaling"], "type": "yarn"}
    assert messages(config, "renamed_longrope") == [
        "rope type 'yarn' is an old name of LongRoPE: transformers' phi3 config class renames it longrope "
        "(short_factor / long_factor, not YaRN); posembed reads it so"
    ]


@pytest.mark.parametrize(
    "rope_type, frequencies, original",
    [
        ("dynamic", "so dynamic NTK never rescales its frequencies", "None"),
        ("linear", "which gives the linear frequencies", "1024"),
    ],
)
def test_phimoe_forward_for_other_rope_types(rope_type, frequencies, original):
    scaling = {"rope_type": rope_type, "factor": 2.0}
    if rope_type == "linear":
        scaling["original_max_position_embeddings"] = 1024
    config = {
        "model_type": "phimoe",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": scaling,
    }
    (message,) = messages(config, "mscale_forward")
    assert (
        f"its forward calls that function again without the sequence length, {frequencies}, and multiplies cos "
        f"and sin by short_mscale=None (sequences up to original_max_position_embeddings={original}) or "
        f"long_mscale=None (longer)"
    ) in message


@pytest.mark.parametrize(
    "written, fix",
    [
        ("1.5e4", "write 15000.0 without quotes"),
        ("2E4", "write 20000.0 without quotes (YAML 1.1 reads 2E4 as a string: write 2.0e+04 there)"),
    ],
)
def test_a_yaml_exponent_note_only_for_an_exponent_without_a_point(written, fix):
    (message,) = messages(llama(rope_theta=written), "not_a_number")
    assert message.endswith(f"fails on it; {fix}")


def test_a_theta_given_to_the_other_layer_type_is_not_read_here():
    olmo3 = {"model_type": "olmo3", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 1024}
    for theta in (10000.0, 500000.0):
        assert messages(olmo3 | {"rope_theta": theta}, "theta_missing") == [
            f"rope_theta={theta:g} is not read for sliding_attention: transformers' olmo3 config class gives it to the "
            f"other layer type and fills in its default 500000 here"
        ]
    assert messages(olmo3, "theta_missing") == [
        f"rope_theta is absent: transformers' olmo3 config class fills in 500000 for {layer}; a loader without that "
        f"class would take 10000"
        for layer in ("sliding_attention", "full_attention")
    ]


def test_a_missing_theta_beside_stated_rope_fields_or_per_layer_types():
    scaled = {k: v for k, v in llama(rope_scaling={"rope_type": "linear", "factor": 2.0}).items() if k != "rope_theta"}
    assert messages(scaled, "theta_missing") == [
        "rope_theta is absent: transformers' llama config class fills in 10000"
    ]
    gemma3 = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 1024,
    }
    assert messages(gemma3, "theta_missing") == [
        "rope_theta is absent: transformers' gemma3_text config class fills in 10000 for sliding_attention",
        "rope_theta is absent: transformers' gemma3_text config class fills in 1e+06 for full_attention; a loader "
        "without that class would take 10000",
    ]


def test_a_top_level_original_that_transformers_ignores_for_the_rope_parameters():
    phimoe = longrope(8, 8) | {"model_type": "phimoe"}
    phimoe["rope_scaling"] |= {"short_mscale": 1.0, "long_mscale": 1.0}  # what PhiMoE's class needs to build it
    assert messages(phimoe, "original_missing") == [
        "rope_type 'longrope' has no original_max_position_embeddings in its RoPE parameters, and transformers ignores "
        "the top-level 1024 for phimoe configs: loaders take max_position_embeddings=4096 as the trained length"
    ]
    gemma3 = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 1024,
        "original_max_position_embeddings": 256,
        "rope_parameters": {
            "full_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    }
    assert found(gemma3, "original_missing") == [
        (
            "original_missing",
            "warning",
            "full_attention",
            "rope_type 'yarn' has no original_max_position_embeddings in its RoPE parameters, and transformers ignores "
            "the top-level 256 for parameters per layer type: loaders take max_position_embeddings=1024 as the trained "
            "length; max_position_embeddings=1024 = 4 x 256 looks already extended, so the factor would compound to "
            "4^2 (effective context 4096)",
        )
    ]


def test_a_class_default_original_is_checked_against_max_position_embeddings():
    phi3 = longrope(8, 8) | {"max_position_embeddings": 512}
    del phi3["original_max_position_embeddings"]
    phi3["rope_scaling"] = {**phi3["rope_scaling"], "factor": 2.0}
    assert found(phi3, "original_missing") + found(phi3, "original_inconsistent") == [
        (
            "original_missing",
            "warning",
            "all",
            "rope_type 'longrope' has no original_max_position_embeddings: "
            "transformers' phi3 config class fills in its default 4096 as the trained length",
        ),
        (
            "original_inconsistent",
            "warning",
            "all",
            "original_max_position_embeddings=4096 exceeds max_position_embeddings=512",
        ),
        (
            "original_inconsistent",
            "warning",
            "all",
            "LongRoPE factor=2 but max_position_embeddings / original = 0.125: the "
            "attention factor follows 'factor' when given, the ratio otherwise",
        ),
    ]


def test_what_a_class_default_original_means_for_a_config_that_states_no_or_some_rope_fields():
    bare = {
        "model_type": "gpt_oss",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 131072,
    }
    assert found(bare, "original_missing") == [
        (
            "original_missing",
            "note",
            "all",
            "the config states no RoPE field: transformers' gpt_oss config class fills in its own yarn parameters, "
            "with original_max_position_embeddings=4096 as the trained length",
        )
    ]
    stated = bare | {"rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048}}
    assert not found(stated, "original_missing") and not found(stated, "original_inconsistent")
    phi3 = longrope(8, 8) | {"max_position_embeddings": 8192}
    del phi3["original_max_position_embeddings"]
    phi3["rope_scaling"] = {**phi3["rope_scaling"], "original_max_position_embeddings": 2048}
    assert found(phi3, "original_inconsistent") == [
        (
            "original_inconsistent",
            "warning",
            "all",
            "original_max_position_embeddings is 2048 in the RoPE parameters, but transformers' phi3 config class "
            "overwrites it with its top-level field, absent here, so with its default 4096: state it at the top level",
        )
    ]
    assert not found(phi3, "original_missing")


def test_two_original_lengths_differ_either_way():
    larger_in_params = yarn() | {"original_max_position_embeddings": 128}
    assert messages(larger_in_params, "original_inconsistent") == [
        "original_max_position_embeddings is 256 in the RoPE parameters but 128 at the top level; transformers builds "
        "the model with the top-level 128: its config keeps it as an attribute, and standardising the RoPE parameters "
        "(at construction for a class that declares the field, when the model is built for any other) overwrites "
        "theirs with it"
    ]


def test_a_per_layer_class_merges_an_old_rope_scaling_under_rope_type_default():
    gemma3 = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 1024,
        "rope_theta": 1e6,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": {"type": "linear", "factor": 8.0},
    }
    assert found(gemma3, "type_ignored") == [
        (
            "type_ignored",
            "warning",
            "full_attention",
            "the RoPE parameters name their type with the old key 'type' ('linear') beside rope_type 'default': "
            "transformers builds 'default' and ignores 'type' (transformers' gemma3_text config class merges a 4.x "
            "rope_scaling into parameters whose rope_type is already 'default'); write rope_type",
        )
    ]


def test_the_old_type_key_is_ignored_only_where_it_names_nothing_that_is_built():
    # 'type' is checked against the rope types the settings build (config.built_types), not against the one
    # hard-coded 'mrope': M-RoPE's 'mrope' names the sections also where a scaled rope_type is dealt to them
    qwen = {
        "model_type": "qwen2_5_vl",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 4096,
        "rope_theta": 1e6,
    }
    sections = {"type": "mrope", "mrope_section": [2, 3, 3]}
    assert not found(qwen | {"rope_scaling": sections}, "type_ignored")  # rope_type 'default' from 'type': 'mrope'
    scaled = qwen | {
        "rope_scaling": {**sections, "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    }
    (layer,) = check_rope_config(scaled, compare=False).layers
    assert layer.settings.rope_type == "yarn" and layer.settings.mrope.section == (2, 3, 3)  # yarn dealt to M-RoPE
    assert not found(scaled, "type_ignored")  # the old check warned "builds 'yarn' and ignores 'type'"
    no_sections = llama(rope_scaling={"type": "mrope", "rope_type": "linear", "factor": 2.0})  # no M-RoPE is built
    assert messages(no_sections, "type_ignored") == [
        "the RoPE parameters name their type with the old key 'type' ('mrope') beside rope_type 'linear': transformers "
        "builds 'linear' and ignores 'type'; write rope_type"
    ]
    scaled_other = qwen | {
        "rope_scaling": {
            **sections,
            "type": "linear",
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 1024,
        }
    }
    assert messages(scaled_other, "type_ignored") == [
        "the RoPE parameters name their type with the old key 'type' ('linear') beside rope_type 'yarn': transformers "
        "builds 'yarn' and ignores 'type'; write rope_type"
    ]


def test_an_old_longrope_name_is_ignored_only_on_the_models_that_rename_it():
    linear = llama(rope_scaling={"rope_type": "linear", "factor": 2.0, "type": "yarn"})
    assert messages(linear, "type_ignored") == [
        "the RoPE parameters name their type with the old key 'type' ('yarn') beside rope_type 'linear': transformers "
        "builds 'linear' and ignores 'type'; write rope_type"
    ]
    phi3 = longrope(8, 8)
    phi3["rope_scaling"] = {**phi3["rope_scaling"], "rope_type": "longrope", "type": "linear"}
    assert messages(phi3, "type_ignored") == [
        "the RoPE parameters name their type with the old key 'type' ('linear') beside rope_type 'longrope': "
        "transformers builds 'longrope' and ignores 'type'; write rope_type"
    ]


def test_a_llama3_low_freq_factor_of_zero_is_the_bounds_error_not_a_crash():
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 0.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 2048,
        },
    }
    assert messages(config, "llama3_bounds") == ["llama3 needs 0 < low_freq_factor <= high_freq_factor, got 0 and 4"]
