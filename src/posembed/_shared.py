"""Submodules registered under several names, saved once.

A model may hand one module to several owners: a position scheme shared by every attention
layer, or held by the embeddings and named again on the model. torch counts its parameters
once (``parameters()``, ``.to()``), but ``state_dict()`` lists them under every name, and
safetensors refuses tensors that share memory. :func:`save_shared_once` makes a module's
state dict hold each shared submodule once, under its *canonical* name (the first one
registered, the name ``named_parameters()`` reports), and fills the other names (*aliases*)
from it when loading, so the file format is the one of a model that registered it once.
"""

from __future__ import annotations

from torch import nn

__all__ = ["alias_prefixes", "save_shared_once"]


def alias_prefixes(module: nn.Module) -> dict[str, str]:
    """``{alias prefix: canonical prefix}`` (both ending in ``"."``) of the submodules of ``module``
    registered under more than one name.

    >>> shared = nn.Linear(2, 2)
    >>> model = nn.ModuleDict({"a": shared, "b": nn.Sequential(shared)})
    >>> alias_prefixes(model)
    {'b.0.': 'a.'}
    """
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, sub in module.named_modules(remove_duplicate=False):
        if any(name.startswith(alias) for alias in aliases):
            continue  # inside an alias: covered by its prefix
        if id(sub) in first:
            aliases[f"{name}."] = f"{first[id(sub)]}."
        else:
            first[id(sub)] = name
    return aliases


def save_shared_once(module: nn.Module) -> None:
    """Register the state-dict hooks that save each shared submodule of ``module`` once.

    ``module.state_dict()`` then drops the alias keys; ``module.load_state_dict()`` copies each
    canonical key to its aliases where the given dict lacks them (so ``strict=True`` holds for
    files written either way).

    >>> shared = nn.Linear(2, 2)
    >>> model = nn.ModuleDict({"a": shared, "b": nn.Sequential(shared)})
    >>> save_shared_once(model)
    >>> sorted(model.state_dict())
    ['a.bias', 'a.weight']
    >>> model.load_state_dict(model.state_dict())
    <All keys matched successfully>
    """
    module.register_state_dict_post_hook(_drop_aliases)
    module.register_load_state_dict_pre_hook(_fill_aliases)


def _drop_aliases(module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    aliases = tuple(prefix + alias for alias in alias_prefixes(module))
    if not aliases:
        return
    for key in [key for key in state_dict if key.startswith(aliases)]:
        del state_dict[key]


def _fill_aliases(module: nn.Module, state_dict: dict, prefix: str, *args) -> None:
    for alias, canonical in alias_prefixes(module).items():
        source = prefix + canonical
        for key in [key for key in state_dict if key.startswith(source)]:
            state_dict.setdefault(prefix + alias + key[len(source):], state_dict[key])
