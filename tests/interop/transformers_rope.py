"""What transformers itself builds from a config: the reference the RoPE-config tests compare with."""

from __future__ import annotations

import copy
import importlib

import pytest
import torch

from posembed.interop.rope.config import rotary_from_hf_config, rotary_from_settings
from posembed.interop.rope.settings import ALL_LAYERS, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config, format_report


def built(raw: dict):
    """transformers' config object (after its model's rotary embedding is built, which edits it)
    and that rotary embedding, for the config dict ``raw`` (copied: ``from_dict`` edits dicts)."""
    import transformers

    config = transformers.CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw))
    module = importlib.import_module(type(config).__module__.replace("configuration_", "modeling_"))
    (name,) = [
        n
        for n in dir(module)
        if n.endswith("RotaryEmbedding") and hasattr(getattr(module, n), "compute_default_rope_parameters")
    ]
    return config, getattr(module, name)(config)


def their_layers(embedding) -> dict[str, tuple[torch.Tensor, float]]:
    """``{layer type: (inv_freq, attention scaling)}`` of every layer type the model built (``all``: one set)."""
    if hasattr(embedding, "inv_freq"):
        return {ALL_LAYERS: (embedding.inv_freq, float(embedding.attention_scaling))}
    return {layer: (getattr(embedding, f"{layer}_inv_freq"), float(getattr(embedding, f"{layer}_attention_scaling")))
            for layer in embedding.layer_types if hasattr(embedding, f"{layer}_inv_freq")}  # fmt: skip


def assert_posembed_is_the_model(raw: dict, lengths: tuple[int, ...] = (), *, alias: bool = True) -> list:
    """posembed's layer types, frequencies and attention factors are the model's own (and its
    half-layout cos / sin at each of ``lengths``), ``rotary_from_hf_config`` agrees for a
    single layer type (``alias``), and ``rope check`` finds every comparison equal. Returns
    posembed's settings, one per layer type."""
    _, embedding = built(raw)
    theirs = their_layers(embedding)
    ours = {s.layer_type: s for s in read_rope_settings(copy.deepcopy(raw))}
    assert set(ours) == set(theirs)
    for layer, (inv_freq, scaling) in theirs.items():
        scheme = rotary_from_settings(ours[layer], angles="fp32")
        torch.testing.assert_close(scheme.inv_freq.float(), inv_freq.float(), rtol=1e-6, atol=0, msg=layer)
        assert float(scheme.attention_scaling) == pytest.approx(scaling, rel=1e-6), layer
        half = scheme.rotary_dim // 2
        for length in lengths:
            positions = torch.arange(length)[None]
            kwargs = {} if layer == ALL_LAYERS else {"layer_type": layer}
            cos, sin = embedding(torch.zeros(1, 1, scheme.head_dim), positions, **kwargs)
            our_cos, our_sin = scheme.cos_sin(positions[0])
            torch.testing.assert_close(our_cos, cos[0, :, :half].float(), rtol=1e-5, atol=1e-5, msg=f"{layer} {length}")
            torch.testing.assert_close(our_sin, sin[0, :, :half].float(), rtol=1e-5, atol=1e-5, msg=f"{layer} {length}")
    if alias and list(ours) == [ALL_LAYERS]:
        built_alias = rotary_from_hf_config(copy.deepcopy(raw), angles="fp32")
        torch.testing.assert_close(built_alias.inv_freq, theirs[ALL_LAYERS][0].float(), rtol=1e-6, atol=0)
    report = check_rope_config(copy.deepcopy(raw))
    for layer in report.layers:
        assert layer.comparisons and all(c.equal for c in layer.comparisons), format_report(report)
    return list(ours.values())
