"""Fast-path fallbacks are logged once per reason, not on every call."""

from __future__ import annotations

import logging

__all__ = ["log_once", "forget_logged"]

_LOGGED: set[tuple[str, str]] = set()


def log_once(logger: logging.Logger, reason: str) -> None:
    """Warn ``reason`` on ``logger`` the first time it is seen.

    >>> log_once(logging.getLogger("posembed.doctest"), "fallback")
    >>> ("posembed.doctest", "fallback") in _LOGGED
    True
    """
    key = (logger.name, reason)
    if key not in _LOGGED:
        _LOGGED.add(key)
        logger.warning(reason)


def forget_logged() -> None:
    """Let every reason be logged again (tests)."""
    _LOGGED.clear()
