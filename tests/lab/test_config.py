"""Typed frozen configs, presets by exact name, key=value overrides."""

from __future__ import annotations

import dataclasses

import pytest

from posembed.lab.config import ExperimentConfig, TrialConfig, apply_overrides, config_hash, parse_value
from posembed.lab.presets import PRESETS, get_preset


def test_trial_config_is_frozen():
    cfg = TrialConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 3  # type: ignore[misc]


def test_overrides_apply_typed_values():
    exp = apply_overrides(
        get_preset("smoke"),
        [
            "steps=50",
            "schemes=learned,alibi",
            "seeds=3,4",
            "lr=2e-3",
            "freeze_positions=true",
            "charlm.context=24",
            "eval_scales=1,2.5",
            'scheme_kwargs={"base": 500}',
        ],
    )
    assert exp.schemes == ("learned", "alibi") and exp.seeds == (3, 4)
    assert all(base.steps == 50 and base.lr == 2e-3 and base.freeze_positions for base in exp.bases)
    assert exp.base("charlm").context == 24 and exp.base("copy").context == get_preset("smoke").base("copy").context
    assert exp.base("copy").eval_scales == (1.0, 2.5)
    assert exp.base("order").kwargs == {"base": 500}


@pytest.mark.parametrize(
    "override, message",
    [
        ("stepz=5", "unknown key 'stepz'"),
        ("steps=five", "steps expects an integer, got 'five'"),
        ("steps=1.5", "steps expects an integer, got '1.5'"),
        ("lr=fast", "lr expects a number, got 'fast'"),
        ("untied=maybe", "untied expects true or false, got 'maybe'"),
        ("seeds=0,x", "seeds expects an integer, got 'x'"),
        ("copyy.steps=5", "unknown key 'copyy.steps'"),
        ("task=copy", "unknown key 'task'"),
        ("steps", "is not of the form key=value"),
        ("steps=0", "steps must be a positive integer, got 0"),
        ("combine=stack", "combine='stack' is not one of add, concat"),
        ("variants=base,wild", "unknown variant 'wild'"),
        ("tasks=copy,chess", "unknown task 'chess'"),
        ("dim=33", "dim=33 must be divisible by heads=2"),
        ("scheme_kwargs=[1", "scheme_kwargs must be a JSON object"),
        ("lr=nan", "lr must be a finite number, got nan"),
        ("lr=inf", "lr must be a finite number, got inf"),
        ("lr=-1", "lr must be > 0, got -1.0"),
        ("beta2=1.5", "beta2 must be in [0, 1), got 1.5"),
        ("weight_decay=-1", "weight_decay must be >= 0, got -1.0"),
        ("warmup=-3", "warmup must be >= 0, got -3"),
        ("grad_clip=nan", "grad_clip must be a finite number, got nan"),
        ("backend=bogus", "backend='bogus' is not one of auto, sdpa, "),
        ("eval_scales=nan", "eval_scales must be finite positive numbers, got nan"),
        ("eval_scales=1,-2", "eval_scales must be finite positive numbers, got 1.0, -2.0"),
        ("seeds=1,1", "seeds lists 1 more than once"),
        ("schemes=rope,alibi,rope", "schemes lists rope more than once"),
    ],
)
def test_bad_overrides_raise_clear_errors(override, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        apply_overrides(get_preset("smoke"), [override])


def test_presets_by_exact_name_only():
    assert set(PRESETS) == {"smoke", "quick", "full", "survey", "calibration", "lengthgen"}
    for name in PRESETS:
        assert get_preset(name).name == name
    for wrong in ("Smoke", "smok", "smoke ", "quick2"):
        with pytest.raises(ValueError, match="unknown preset"):
            get_preset(wrong)


def test_round_trip_and_hashes():
    cfg = TrialConfig(task="sort", scheme="rope", scheme_kwargs=(("base", 500.0),), eval_scales=(1.0, 3.0))
    again = TrialConfig.from_dict(cfg.to_dict())
    assert again == cfg and again.trial_id == cfg.trial_id
    assert dataclasses.replace(cfg, seed=1).trial_id != cfg.trial_id
    exp = get_preset("quick")
    assert exp.config_hash == get_preset("quick").config_hash
    assert apply_overrides(exp, ["steps=7"]).config_hash != exp.config_hash
    assert config_hash([1, 2]) != config_hash([2, 1])


def test_from_dict_rejects_unknown_keys_and_wrong_types():
    with pytest.raises(ValueError, match="unknown TrialConfig keys: colour"):
        TrialConfig.from_dict({"colour": "red"})
    with pytest.raises(ValueError, match="steps must be int"):
        TrialConfig.from_dict({"steps": "10"})
    with pytest.raises(ValueError, match="untied must be bool"):
        TrialConfig.from_dict({"untied": 1})


def test_parse_value_bool_spellings():
    assert [parse_value("x", v, bool) for v in ("true", "False", "1", "no", "ON")] == [True, False, True, False, True]


def test_experiment_needs_a_base_per_task():
    with pytest.raises(ValueError, match="no base config for task 'copy'"):
        ExperimentConfig(name="x", tasks=("copy",), schemes=("learned",), bases=(TrialConfig(task="order"),))
    with pytest.raises(ValueError, match="schemes must not be empty"):
        ExperimentConfig(name="x", tasks=("copy",), schemes=(), bases=(TrialConfig(task="copy"),))


@pytest.mark.parametrize("name", ["x/../../y", "/tmp/y", "..", ".", "a\\b", "up/..", ""])
def test_experiment_name_cannot_be_a_path(name):
    with pytest.raises(ValueError, match="experiment name") as error:
        apply_overrides(get_preset("smoke"), [f"name={name}"])
    assert repr(name) in str(error.value)


def test_plain_experiment_names_are_kept():
    assert apply_overrides(get_preset("smoke"), ["name=ablation-v2.1"]).name == "ablation-v2.1"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("steps", 0, "steps must be a positive integer, got 0"),
        ("batch", 2.5, "batch must be a positive integer, got 2.5"),
        ("dim", 33, "dim=33 must be divisible by heads=4"),
        ("lr", -1.0, "lr must be > 0, got -1.0"),
        ("lr", float("inf"), "lr must be a finite number, got inf"),
        ("beta2", 1.5, "beta2 must be in [0, 1), got 1.5"),
        ("weight_decay", -1.0, "weight_decay must be >= 0, got -1.0"),
        ("warmup", -3, "warmup must be >= 0, got -3"),
        ("seed", -1, "seed must be >= 0, got -1"),
        ("grad_clip", float("nan"), "grad_clip must be a finite number, got nan"),
        ("optimizer", "sgd", "optimizer='sgd' is not one of adamw, adamw_fused"),
        ("matmuls", "fp16", "matmuls='fp16' is not one of fp32, bf16"),
    ],
)
def test_the_training_fields_are_checked_once_for_trials_and_the_context_study(field, value, message):
    from posembed.lab.config import TrainingConfig
    from posembed.lab.context.presets import ContextConfig

    assert issubclass(TrialConfig, TrainingConfig) and issubclass(ContextConfig, TrainingConfig)
    for make in (TrainingConfig, TrialConfig, lambda **kw: ContextConfig(name="x", **kw)):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            make(**{field: value})


def test_the_context_study_hashes_its_new_training_fields_only_away_from_their_defaults():
    from posembed.lab.context.presets import ContextConfig
    from posembed.lab.context.store import train_id_of

    study = ContextConfig(name="x")
    later = ("weight_decay", "beta2", "grad_clip", "optimizer", "matmuls")
    body = {k: v for k, v in study.to_dict().items() if k not in later}
    assert train_id_of(body) == study.train_id  # a store from before the fields keeps its models
    changes = (
        {"weight_decay": 0.0},
        {"beta2": 0.95},
        {"grad_clip": 0.0},
        {"optimizer": "adamw_fused"},
        {"matmuls": "bf16"},
    )
    for change in changes:
        other = dataclasses.replace(study, **change)
        assert other.train_id != study.train_id and other.config_id != study.config_id, change


def test_bf16_matmuls_is_a_trial_setting_left_out_of_the_id_at_its_default():
    """``matmuls`` came after stored trials: at "fp32" the trial id is what it was; "bf16" is another trial."""
    base = TrialConfig(task="copy", scheme="learned")
    assert "matmuls" not in base.to_dict()
    bf16 = dataclasses.replace(base, matmuls="bf16")
    assert bf16.to_dict()["matmuls"] == "bf16" and bf16.trial_id != base.trial_id
    assert TrialConfig.from_dict(bf16.to_dict()) == bf16
