"""The lab's progress lines and bars: :mod:`posembed._utils.progress`, where every layer finds them.

>>> from posembed.lab.sweep.progress import Progress, LAB_LOGGER
>>> LAB_LOGGER
'posembed.lab.sweep.progress'
"""

from __future__ import annotations

from posembed._utils.progress import LAB_LOGGER, MODES, Progress, log_to_stderr, progress_mode, quiet_transformers

__all__ = ["Progress", "progress_mode", "log_to_stderr", "quiet_transformers", "MODES", "LAB_LOGGER"]
