"""The `{{placeholder}}` renderer every prompt goes through, built-in or a plugin's.

A module of its own, below both `bot.runtime.prompts` (the built-in templates, which format plugin
parts) and `bot.plugin.api` (whose contexts render a plugin's templates), so that neither
imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill `{{key}}` placeholders; unknown keys become empty, and blank runs collapse."""
    text = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), ""), template)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def fill_names(text: str, names: Mapping[str, str]) -> str:
    """Replace `{{user1}}`-style actor placeholders in examples, leaving other text alone."""
    return _PLACEHOLDER.sub(lambda m: names.get(m.group(1), m.group(0)), text)
