"""Small transformers built only from library parts: a bidirectional encoder and a causal decoder.

Any scheme of any kind goes in one place:

- absolute schemes go into :class:`~posembed.nn.embedding.block.TransformerEmbeddings` (``combine``
  ``"add"`` or ``"concat"``; ``inject="every_layer"`` re-adds the position vectors to the residual
  stream before every block after the first; ``untied=True`` instead feeds them to TUPE-A untied
  position attention in every layer, Ke et al. 2021);
- rotary and bias schemes are shared by every :class:`~posembed.nn.attention.layer.SelfAttention` layer
  (each layer holds the same module, as ``model.scheme`` does; the state dict lists it under
  every name, as torch does for any shared module, and a checkpoint file holds it once:
  ``safetensors.torch.save_model`` / ``load_model``);
- ``scheme=None`` is NoPE (no position information; causal decoders still recover it,
  Haviv et al. 2022);
- ``schemes=[s_0, ..., s_{depth-1}]`` instead gives each layer its own rotary or bias scheme
  (or ``None``): NoPE every Nth layer (Llama 4), local and global RoPE bases (Gemma 3,
  ModernBERT), RoPE beside ALiBi. Layers handed the same object share it (saved once); an
  absolute ``scheme=`` may go beside it. See :mod:`posembed.nn.model.layers`.

Blocks are pre-LayerNorm (attention, then a GELU MLP), as GPT-2 / nanoGPT; the output head is
a separate linear layer (not weight-tied, so that every tensor is saved once).

:meth:`TransformerModel.config_dict` and :func:`build_model` round-trip a model through a
JSON-able dict (the lab's checkpoints and the inspector use them).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

import torch  # noqa: F401 (the doctests use it)
from torch import Tensor, nn

from posembed._utils.checks import check_positive_int
from posembed.nn.attention.layer import SelfAttention
from posembed.nn.embedding.block import TransformerEmbeddings
from posembed.nn.model.checks import check_mask, check_options
from posembed.nn.model.layers import build_layer_schemes, check_layer_schemes, layer_schemes_config
from posembed.schemes.base import Kind, PositionScheme, RotaryScheme
from posembed.schemes.config import build_scheme, scheme_config
from posembed.schemes.positions import resolve_positions

__all__ = ["Block", "Encoder", "Decoder", "TransformerModel", "build_model", "scheme_config", "build_scheme"]


class Block(nn.Module):
    """Pre-LN transformer block: ``x + attn(LN(x))``, then ``x + mlp(LN(x))``.

    Args:
        dim: width C. num_heads: heads H. mlp_ratio: hidden width of the MLP is ``mlp_ratio * C``.
        attention: keyword arguments for :class:`~posembed.nn.attention.layer.SelfAttention`.

    Shape:
        x ``(B, T, C)`` -> ``(B, T, C)``.

    Example:
        >>> Block(8, 2)(torch.randn(1, 3, 8)).shape
        torch.Size([1, 3, 8])
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        mlp_ratio: int = 4,
        dropout: float = 0.0,
        bias: bool = True,
        device=None,
        dtype=None,
        **attention,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.ln_1 = nn.LayerNorm(dim, bias=bias, **factory)
        self.attn = SelfAttention(dim, num_heads, dropout=dropout, bias=bias, **attention, **factory)
        self.ln_2 = nn.LayerNorm(dim, bias=bias, **factory)
        hidden = check_positive_int(mlp_ratio, "mlp_ratio") * dim
        self.mlp = nn.Sequential(
            nn.Linear(dim, hidden, bias=bias, **factory),
            nn.GELU(),
            nn.Linear(hidden, dim, bias=bias, **factory),
            nn.Dropout(dropout),
        )
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, position_ids=None, attention_mask=None, position_vectors=None) -> Tensor:
        x = x + self.resid_dropout(self.attn(self.ln_1(x), position_ids, attention_mask, position_vectors))
        return x + self.mlp(self.ln_2(x))


class TransformerModel(nn.Module):
    """Shared body of :class:`Encoder` and :class:`Decoder` (see their docstrings)."""

    causal: bool = False

    def __init__(
        self,
        vocab_size: int,
        *,
        dim: int,
        depth: int,
        num_heads: int,
        scheme: PositionScheme | None = None,
        schemes: Sequence[PositionScheme | None] | None = None,
        max_len: int | None = None,
        combine: str = "add",
        inject: str = "once",
        untied: bool = False,
        dropout: float = 0.0,
        mlp_ratio: int = 4,
        backend: str = "auto",
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_options(scheme, combine, inject, untied)
        self.vocab_size = check_positive_int(vocab_size, "vocab_size")
        self.dim = check_positive_int(dim, "dim")
        self.depth = check_positive_int(depth, "depth")
        self.num_heads = check_positive_int(num_heads, "num_heads")
        self.max_len = None if max_len is None else check_positive_int(max_len, "max_len")
        self.combine, self.inject, self.untied = combine, inject, untied
        self.dropout, self.mlp_ratio, self.backend = dropout, mlp_ratio, backend
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be True or False, got {bias!r}")
        self.bias = bias
        factory = {"device": device, "dtype": dtype}
        absolute = scheme is not None and scheme.kind == Kind.ABSOLUTE
        # a fixed table (sinusoidal) has unit amplitude: scale tokens to match, as Vaswani et al. do
        fixed_table = absolute and not untied and not any(p.requires_grad for p in scheme.parameters())
        self.embeddings = TransformerEmbeddings(
            vocab_size,
            dim,
            position=scheme if absolute and not untied else None,
            type_vocab_size=0,
            pad_token_id=None,
            combine=combine,
            dropout=dropout,
            token_scale=math.sqrt(dim) if fixed_table else 1.0,
            **factory,
        )
        in_attention = [None if absolute else scheme] * depth
        if schemes is not None:
            in_attention = check_layer_schemes(schemes, depth, scheme)
        #: the position scheme, wherever it acts (for an absolute one, the same module as
        #: ``embeddings.position``; for rotary and bias ones, as every layer's ``attn.scheme``)
        self.scheme = scheme
        self.position_norm = nn.LayerNorm(scheme.dim, **factory) if untied else None
        self.blocks = nn.ModuleList(
            Block(
                dim,
                num_heads,
                mlp_ratio=mlp_ratio,
                dropout=dropout,
                bias=bias,
                scheme=layer,
                causal=self.causal,
                backend=backend,
                untied_dim=scheme.dim if untied else None,
                **factory,
            )
            for layer in in_attention
        )
        self.norm = nn.LayerNorm(dim, bias=bias, **factory)

    @property
    def layer_schemes(self) -> list[PositionScheme | None]:
        """Each block's attention scheme (``None``: no positions in that layer), shallowest first."""
        return [block.attn.scheme for block in self.blocks]

    @property
    def per_layer(self) -> bool:
        """Whether the layers' schemes differ from the one ``scheme`` (built with ``schemes=``)."""
        shared = None if self.scheme is None or self.scheme.kind == Kind.ABSOLUTE else self.scheme
        return any(layer is not shared for layer in self.layer_schemes)

    def _owned_schemes(self) -> list[PositionScheme]:
        """``scheme`` and every layer's scheme, each object once."""
        owned = {id(s): s for s in (self.scheme, *self.layer_schemes) if s is not None}
        return list(owned.values())

    def reset_parameters(self) -> None:
        """Re-initialise every parameter, the position scheme's included."""
        self.embeddings.reset_parameters()  # the position scheme's too, when the embeddings hold it
        schemes = [s for s in self._owned_schemes() if s is not self.embeddings.position]
        for owned in (*schemes, self.position_norm):
            if owned is not None and hasattr(owned, "reset_parameters"):
                owned.reset_parameters()
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2 init of the blocks and the head (normal 0.02; residual outputs 0.02 / sqrt(2 depth)).

        The constructor calls only this: a scheme passed in keeps its parameters.
        """
        scheme = {id(p) for owned in self._owned_schemes() for p in owned.parameters()}
        for name, param in [*self.blocks.named_parameters(), *self.head.named_parameters(prefix="head")]:
            if id(param) in scheme:
                continue
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif param.dim() == 2:
                residual = name.endswith("out_proj.weight") or name.endswith("mlp.2.weight")
                nn.init.normal_(param, std=0.02 / math.sqrt(2 * self.depth) if residual else 0.02)
            else:
                nn.init.ones_(param)

    def hidden_states(
        self, input_ids: Tensor, position_ids: Tensor | None = None, attention_mask: Tensor | None = None
    ) -> list[Tensor]:
        """``[h_0, ..., h_depth]``: the embeddings' output and every block's output, each ``(B, T, C)``."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (B, T), got {tuple(input_ids.shape)}")
        check_mask(input_ids, attention_mask)
        length = input_ids.shape[1]
        if self.max_len is not None and length > self.max_len:
            raise ValueError(f"input length {length} exceeds max_len={self.max_len} of this model")
        if self._takes_coordinates() and self.embeddings.position is None:
            positions = None  # (T, A) / (B, T, A) coordinates: only the layers' schemes read (and check) them
            h = self.embeddings(input_ids)
        else:
            positions = resolve_positions(position_ids, length, input_ids.device)
            h = self.embeddings(input_ids, position_ids=position_ids)
        position_vectors = self._untied_vectors(positions)
        states = [h]
        for index, block in enumerate(self.blocks):
            if index and self.inject == "every_layer":
                h = h + self.embeddings.position_embeddings(positions).type_as(h)
            ids = None if positions is None and block.attn.scheme is None else position_ids  # NoPE beside M-RoPE
            h = block(h, ids, attention_mask, position_vectors)  # None: schemes' cached arange
            states.append(h)
        return states

    def _takes_coordinates(self) -> bool:
        """Whether a layer's rotary scheme reads coordinates (``num_axes > 1``: axial, Pixtral, M-RoPE)."""
        return any(isinstance(s, RotaryScheme) and s.num_axes > 1 for s in self.layer_schemes)

    def _untied_vectors(self, positions: Tensor | None) -> Tensor | None:
        if not self.untied:
            return None
        return self.position_norm(self.scheme(positions).to(self.position_norm.weight.dtype))

    def config_dict(self) -> dict:
        """The constructor arguments as a JSON-able dict (``scheme`` as ``{"name": ..., **kwargs}``;
        a model built with ``schemes=`` adds ``layer_schemes``, see :mod:`posembed.nn.model.layers`)."""
        config = {
            "architecture": type(self).__name__.lower(),
            "vocab_size": self.vocab_size,
            "dim": self.dim,
            "depth": self.depth,
            "num_heads": self.num_heads,
            "scheme": None if self.scheme is None else scheme_config(self.scheme),
            "max_len": self.max_len,
            "combine": self.combine,
            "inject": self.inject,
            "untied": self.untied,
            "dropout": self.dropout,
            "mlp_ratio": self.mlp_ratio,
            "backend": self.backend,
        }
        if not self.bias:  # left out when True: configs saved before the option load unchanged
            config["bias"] = False
        if self.per_layer:
            config["layer_schemes"] = layer_schemes_config(self.layer_schemes)
        return config

    def extra_repr(self) -> str:
        scheme = None if self.scheme is None else type(self.scheme).__name__
        if self.per_layer:
            names = [None if s is None else type(s).__name__ for s in self.layer_schemes]
            scheme = f"{scheme}, schemes=[{', '.join(map(str, names))}]"
        return f"scheme={scheme}, combine={self.combine!r}, inject={self.inject!r}, untied={self.untied}"


class Decoder(TransformerModel):
    """Causal language model: embeddings, ``depth`` pre-LN blocks, LayerNorm, vocabulary head.

    Args:
        vocab_size: number of token ids.
        dim: width C. depth: number of blocks. num_heads: heads H (``dim % num_heads == 0``).
        scheme: any :class:`~posembed.schemes.base.PositionScheme`, or ``None`` (NoPE).
        schemes: one rotary or bias scheme (or ``None``) per layer, ``depth`` of them, instead of a
            rotary or bias ``scheme`` (an absolute ``scheme`` may go beside it).
        max_len: longest input accepted (``None``: whatever the scheme allows).
        combine: ``"add"`` or ``"concat"`` (absolute schemes only).
        inject: ``"once"`` or ``"every_layer"`` (absolute schemes only).
        untied: TUPE-A untied position attention (absolute schemes only; positions then skip the input).
        dropout: dropout in embeddings, attention and blocks. mlp_ratio: MLP width factor.
        backend: attention backend of every layer (see :class:`~posembed.nn.attention.layer.SelfAttention`).
        bias: ``False`` drops the biases of the blocks' linear layers and LayerNorms and of the
            final LayerNorm (nanoGPT's ``bias=False``); the embedding block keeps its LayerNorm's.

    Shape:
        input_ids ``(B, T)``; position_ids ``(T,)``/``(B, T)`` (coordinates ``(T, A)``/``(B, T, A)`` for axial,
        Pixtral and M-RoPE layers); attention_mask ``(B, T)`` ->
        logits ``(B, T, vocab_size)``.

    Example:
        >>> from posembed.schemes.absolute.learned import LearnedAbsolute
        >>> model = Decoder(11, dim=8, depth=2, num_heads=2, scheme=LearnedAbsolute(16, 8))
        >>> model(torch.randint(0, 11, (2, 5))).shape
        torch.Size([2, 5, 11])
    """

    causal = True

    def __init__(self, vocab_size: int, **kwargs) -> None:
        super().__init__(vocab_size, **kwargs)
        factory = {"device": kwargs.get("device"), "dtype": kwargs.get("dtype")}
        self.head = nn.Linear(self.dim, vocab_size, bias=False, **factory)
        self._init_weights()

    def forward(
        self,
        input_ids: Tensor,
        position_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        return_hidden_states: bool = False,
    ):
        """Next-token logits ``(B, T, vocab_size)`` (and the hidden states when asked)."""
        states = self.hidden_states(input_ids, position_ids, attention_mask)
        logits = self.head(self.norm(states[-1]))
        return (logits, states) if return_hidden_states else logits


class Encoder(TransformerModel):
    """Bidirectional encoder: per-token logits, or a sequence classifier when ``num_classes`` is set.

    Takes the arguments of :class:`Decoder`, plus ``num_classes``: when given, the output is
    ``(B, num_classes)`` from the mean of the final hidden states over real tokens
    (``attention_mask``); otherwise ``(B, T, vocab_size)``.

    Example:
        >>> from posembed.schemes.absolute.learned import LearnedAbsolute
        >>> model = Encoder(11, dim=8, depth=1, num_heads=2, scheme=LearnedAbsolute(16, 8), num_classes=3)
        >>> model(torch.randint(0, 11, (2, 5))).shape
        torch.Size([2, 3])
    """

    causal = False

    def __init__(self, vocab_size: int, *, num_classes: int | None = None, **kwargs) -> None:
        super().__init__(vocab_size, **kwargs)
        self.num_classes = None if num_classes is None else check_positive_int(num_classes, "num_classes")
        factory = {"device": kwargs.get("device"), "dtype": kwargs.get("dtype")}
        out = vocab_size if num_classes is None else num_classes
        self.head = nn.Linear(self.dim, out, bias=num_classes is not None, **factory)
        self._init_weights()

    def forward(
        self,
        input_ids: Tensor,
        position_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        return_hidden_states: bool = False,
    ):
        """Logits ``(B, T, vocab_size)`` or ``(B, num_classes)`` (and the hidden states when asked)."""
        states = self.hidden_states(input_ids, position_ids, attention_mask)
        h = self.norm(states[-1])  # (B, T, C)
        if self.num_classes is not None:
            h = _masked_mean(h, attention_mask)  # (B, C)
        logits = self.head(h)
        return (logits, states) if return_hidden_states else logits

    def config_dict(self) -> dict:
        return {**super().config_dict(), "num_classes": self.num_classes}


def _masked_mean(h: Tensor, attention_mask: Tensor | None) -> Tensor:
    if attention_mask is None:
        return h.mean(dim=1)
    weights = (attention_mask != 0).to(h.dtype).unsqueeze(-1)  # (B, T, 1)
    return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


# ---------------------------------------------------------------------- config round trip


def build_model(config: dict, *, device=None, dtype=None) -> TransformerModel:
    """Rebuild an :class:`Encoder` or :class:`Decoder` from :meth:`TransformerModel.config_dict`.

    Example:
        >>> from posembed.schemes.absolute.learned import LearnedAbsolute
        >>> model = Decoder(11, dim=8, depth=1, num_heads=2, scheme=LearnedAbsolute(16, 8))
        >>> build_model(model.config_dict()).config_dict() == model.config_dict()
        True
    """
    config = dict(config)
    architecture = config.pop("architecture", None)
    classes = {"decoder": Decoder, "encoder": Encoder}
    if architecture not in classes:
        raise ValueError(f"config 'architecture' must be 'decoder' or 'encoder', got {architecture!r}")
    scheme = config.pop("scheme", None)
    layers = config.pop("layer_schemes", None)  # absent in configs of single-scheme models
    allowed = set(inspect.signature(TransformerModel.__init__).parameters) - {"self", "schemes", "device", "dtype"}
    allowed |= {"num_classes"} if architecture == "encoder" else set()
    unknown = set(config) - allowed
    if unknown:
        raise ValueError(f"unknown model config keys: {', '.join(sorted(unknown))}")
    built = None if scheme is None else build_scheme(scheme)
    per_layer = None if layers is None else build_layer_schemes(layers)
    if device is not None:  # the schemes keep their own dtypes (fp32 position math)
        built = None if built is None else built.to(device=device)
        per_layer = None if per_layer is None else [None if s is None else s.to(device=device) for s in per_layer]
    return classes[architecture](scheme=built, schemes=per_layer, device=device, dtype=dtype, **config)
