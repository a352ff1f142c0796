"""Absolute schemes: a vector per position, added to the token embedding.

Files:

================== ========================================================================
file               what
================== ========================================================================
``learned``        a learned table
``sinusoidal``     fixed sinusoids (Vaswani et al. 2017) and their scaled variant
``sinusoidal_nd``  sinusoids on 2-D and 3-D grids
================== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.schemes.absolute.<file>: imported on first use
