"""Statistics: the one verdict rule and its power (imports nothing else from posembed but ``errors``).

Files:

============ ========================================================================
file         what
============ ========================================================================
``verdict``  the one verdict rule: Welch / seed-paired t / McNemar, TOST for "alike", Holm-Shaffer
``power``    the minimum detectable difference and the seeds a "cannot tell" would need
============ ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.stats.<file>: imported on first use
