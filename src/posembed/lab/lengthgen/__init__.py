"""``lengthgen``: the length-generalisation sweep (Kazemnejad et al. 2023, Ruoss et al. 2023).

=============== =====================================================================
file            what
=============== =====================================================================
``presets``     the ``lengthgen`` preset (copy beyond the training length), its measured table
``ranking``     mean exact match past the training length and the schemes' mean reciprocal rank
=============== =====================================================================

The preset is registered in :data:`posembed.lab.presets.PRESETS`; a run's rows come from its
store through :func:`posembed.lab.sweep.listing.store_rows`.
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.lab.lengthgen.<file>: imported on first use
