"""``bias=False`` models (nanoGPT's option) and the lab's optimizer choice."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from posembed.lab.calibration import NANOGPT_CPU
from posembed.lab.config import TrialConfig
from posembed.lab.training.train import make_optimizer
from posembed.nn.model.transformer import Decoder, Encoder, build_model
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.rotary.rope import RotaryEmbedding


def _decoder(**kwargs) -> Decoder:
    torch.manual_seed(0)
    return Decoder(13, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8), **kwargs)


def test_no_bias_drops_every_block_bias_and_keeps_the_embedding_norm():
    model = _decoder(bias=False)
    names = [name for name, _ in model.named_parameters()]
    assert [n for n in names if n.endswith("bias")] == ["embeddings.norm.bias"]
    assert len(names) == len([n for n, _ in _decoder().named_parameters()]) - 2 * (2 + 2 + 2) - 1


@pytest.mark.parametrize("cls", [Decoder, Encoder])
def test_bias_round_trips_through_the_config_and_old_configs_keep_biases(cls):
    model = cls(13, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(8, 16), bias=False)
    config = model.config_dict()
    assert config["bias"] is False
    rebuilt = build_model(config)
    assert rebuilt.config_dict() == config
    assert set(rebuilt.state_dict()) == set(model.state_dict())
    default = cls(13, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(8, 16)).config_dict()
    assert "bias" not in default  # configs saved before the option still read the same
    assert build_model(default).blocks[0].ln_1.bias is not None


def test_no_bias_forward_equals_zero_biases():
    with_bias, without = _decoder(), _decoder(bias=False)
    state = {k: v for k, v in with_bias.state_dict().items()}
    for name, value in state.items():
        if name.endswith("bias") and not name.startswith("embeddings"):
            value.zero_()
    without.load_state_dict({k: v for k, v in state.items() if k in without.state_dict()})
    with_bias.load_state_dict(state)
    ids = torch.randint(0, 13, (2, 7))
    torch.testing.assert_close(without(ids), with_bias(ids), rtol=0, atol=1e-6)


def test_bias_must_be_a_bool():
    with pytest.raises(TypeError, match="bias must be True or False, got 'no'"):
        _decoder(bias="no")


def test_later_trial_fields_at_their_defaults_keep_earlier_trial_ids():
    cfg = TrialConfig(task="copy", scheme="rope")
    assert "bias" not in cfg.to_dict() and "optimizer" not in cfg.to_dict()
    assert dataclasses.replace(cfg, bias=False).trial_id != cfg.trial_id
    assert dataclasses.replace(cfg, optimizer="adamw_fused").trial_id != cfg.trial_id
    again = TrialConfig.from_dict(dataclasses.replace(cfg, bias=False, optimizer="adamw_fused").to_dict())
    assert (again.bias, again.optimizer) == (False, "adamw_fused")


def test_trial_ids_are_pinned():
    # computed before the two fields were added (a change here orphans every stored trial)
    assert TrialConfig().trial_id == TrialConfig.from_dict(TrialConfig().to_dict()).trial_id
    assert TrialConfig(task="copy", scheme="rope", seed=3).trial_id == "8690047fbca3b7e8"


def test_unknown_optimizer_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="optimizer='sgd' is not one of adamw, adamw_fused"):
        TrialConfig(optimizer="sgd")


@pytest.mark.parametrize("name, fused", [("adamw", None), ("adamw_fused", True)])
def test_make_optimizer_picks_the_kernel(name, fused):
    model = _decoder()
    optimizer = make_optimizer(model, TrialConfig(optimizer=name), torch.device("cpu"))
    assert optimizer.defaults["fused"] is fused
    assert make_optimizer(model, TrialConfig(), torch.device("cuda")).defaults["fused"] is True  # built lazily


def test_fused_adamw_stays_within_rounding_of_the_loop():
    models = {name: _decoder() for name in ("adamw", "adamw_fused")}
    ids = torch.randint(0, 13, (4, 9), generator=torch.Generator().manual_seed(1))
    for name, model in models.items():
        optimizer = make_optimizer(model, TrialConfig(optimizer=name, lr=1e-2), torch.device("cpu"))
        for _ in range(5):
            optimizer.zero_grad()
            model(ids).logsumexp(-1).mean().backward()
            optimizer.step()
    for a, b in zip(models["adamw"].parameters(), models["adamw_fused"].parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_calibration_follows_nanogpts_recipe():
    assert NANOGPT_CPU.bias is False and NANOGPT_CPU.optimizer == "adamw_fused"
