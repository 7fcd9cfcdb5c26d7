"""The plugins a checkout ships: those git tracks in `plugins/`, as a fresh clone has them.

A plugin an operator drops into `plugins/` (the README's, the template's copy) is loaded like
the shipped ones but is theirs: tests about what Mnemo ships (the core names no built-in
plugin, the README lists them) read this list, so such a plugin keeps them green.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def tracked_plugin_names(repo: Path) -> set[str] | None:
    """The module and package names under `repo/plugins` that git tracks; None when `repo`
    is not a git checkout (then every plugin there counts as shipped)."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z", "--", "plugins"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = set()
    for path in filter(None, listed.split("\0")):
        parts = Path(path).parts
        if len(parts) >= 2 and not parts[1].startswith(("_", ".")):
            names.add(Path(parts[1]).stem)
    return names or None
