"""Errors every platform raises. Their own module, so the platforms never import the runner
(`startup.py` imports the platforms; the other way round was an import cycle)."""

from __future__ import annotations


class PlatformError(Exception):
    """A platform failed; the message is one line naming it, and never holds a token."""


class PlatformStartupError(PlatformError):
    """A platform could not start (a rejected token, an unreachable API, ...)."""
