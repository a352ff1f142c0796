"""Wang & Chen probes and the per-layer MLP probe."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posembed import Sinusoidal
from posembed.analysis.probes import absolute_probe, layer_probe, layer_probes, relative_probe


def test_absolute_probe_on_sinusoidal_d768_is_exact():
    table = Sinusoidal(dim=768)(torch.arange(512)).double().numpy()
    result = absolute_probe(table)
    assert result.score == 0.0
    assert result.chance == 128.0


def test_absolute_probe_on_shuffled_information_is_near_chance():
    table = np.random.default_rng(0).normal(size=(256, 8))
    result = absolute_probe(table)
    assert result.score > 0.8 * result.chance


def test_relative_probe_reads_order_from_a_linear_position_code():
    positions = np.arange(200.0)
    table = np.stack([positions, np.sin(positions)], axis=1)
    assert relative_probe(table, pairs=600).score < 0.02
    noise = np.random.default_rng(1).normal(size=(200, 4))
    assert relative_probe(noise, pairs=600).score > 0.35


def test_layer_probe_finds_position_and_misses_noise():
    rng = np.random.default_rng(0)
    windows, length = 12, 16
    positions = np.tile(np.arange(length), windows)
    groups = np.repeat(np.arange(windows), length)
    coded = np.eye(length)[positions] + 0.05 * rng.normal(size=(len(positions), length))
    noise = rng.normal(size=(len(positions), length))
    found, missed = layer_probes([coded, noise], positions, groups, hidden_units=32, max_iter=200)
    assert found.score == 0.0
    assert missed.score > 0.6 * missed.chance


def test_bad_input():
    with pytest.raises(ValueError, match=r"T >= 10 positions, got shape \(4, 3\)"):
        absolute_probe(np.ones((4, 3)))
    with pytest.raises(ValueError, match="differ in length"):
        layer_probe(np.ones((20, 3)), np.arange(19), np.zeros(20))
    with pytest.raises(ValueError, match="at least 2 windows"):
        layer_probe(np.ones((20, 3)), np.arange(20), np.zeros(20))
