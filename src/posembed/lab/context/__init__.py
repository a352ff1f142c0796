"""The context-extension study: train at L, store, evaluate at 1x-8x L, report; and ``lab extend``.

One direction of flow, one file per step: ``run`` builds each model (``models``), calls ``train``
(which keeps each model as a checkpoint and returns its facts), then ``evaluate`` (which only
measures), and writes both to ``store``; the report, :mod:`posembed.lab.report.context`, reads
the store the run hands on.

=============== =====================================================================
file            what
=============== =====================================================================
``presets``     :class:`ContextConfig` (one study, its ids) and the named presets
``corpus``      :class:`ContextData`: the text in the passkey vocabulary, split 90/10
``methods``     :data:`METHODS` and :func:`method_scheme`: each extension method's rotary
                scheme for a factor, built by the factory (:func:`longrope_factors`);
                :func:`extended` (a RoPE model with a method's scheme swapped in)
``swap``        :func:`swap_scheme` (a model with other schemes, same weights),
                :func:`rope_base`, :func:`rotary_head_dim`
``models``      the models a study trains (RoPE and the factory's references), each built fresh
``train``       how they train (the passkey curriculum, a fine-tune's config), a model
                trained or reloaded from its checkpoint, with its facts for the run to store
``evaluate``    the scores of one model at one length (perplexity, passkey per depth);
                it reads and writes nothing
``store``       :class:`ContextStore`: the study's SQLite rows, resumable, keyed by the
                ids it owns (:func:`config_id_of`, :func:`train_id_of`)
``run``         :func:`run_context`: every seed's models trained (fine-tunes included),
                then evaluated, in order
``extend``      :func:`reevaluate_checkpoint` (``posembed lab extend``)
``published``   the published figures the report's verdicts compare against
=============== =====================================================================

>>> scheme = method_scheme("yarn", head_dim=16, factor=4.0, original_len=64)
>>> type(scheme).__name__, scheme.factor, scheme.original_max_len
('YaRNRotary', 4.0, 64)
"""

from posembed._utils.names import submodules
from posembed.lab.context.methods import METHODS, extended, longrope_factors, method_scheme
from posembed.lab.context.swap import rope_base, rotary_head_dim, swap_scheme

__all__ = ["METHODS", "method_scheme", "longrope_factors", "swap_scheme", "extended", "rope_base", "rotary_head_dim"]

__getattr__ = submodules(__name__)  # posembed.lab.context.<file>: imported on first use
