"""Checks of configuration values, made when a value is given (sans-IO).

Each check raises :class:`ConfigurationError` (a ``ValueError``) naming the setting and the
value, so a bad value fails where it was written rather than later, somewhere else, under
another name (a per-run timeout of ``-1`` used to make every call's result blame its tool).
"""

from __future__ import annotations

import math

from ._exceptions import ConfigurationError

__all__ = ["check_count", "check_flag", "check_seconds"]


def check_seconds(name: str, value: object) -> None:
    """``value`` must be ``None`` or a number of seconds above 0.

    ``math.inf`` is accepted and means no limit, as in :func:`trio.move_on_after`; NaN, a
    bool, a string or any other non-number is refused.

    Raises:
        ConfigurationError: naming ``name`` and ``value``.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        ok = False
    else:
        ok = not math.isnan(value) and value > 0
    if not ok:
        raise ConfigurationError(f"{name} must be a number of seconds > 0 or None, got {value!r}")


def check_flag(name: str, value: object) -> None:
    """``value`` must be ``True`` or ``False`` (a string from a config file, ``"false"``, would
    otherwise turn it on; ``0`` and ``None`` are refused as well).

    Raises:
        ConfigurationError: naming ``name`` and ``value``.
    """
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, got {value!r:.80}")


def check_count(name: str, value: object) -> None:
    """``value`` must be ``None`` or an integer of at least 0 (not a bool, not a float).

    Raises:
        ConfigurationError: naming ``name`` and ``value``.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{name} must be an integer >= 0 or None, got {value!r}")
