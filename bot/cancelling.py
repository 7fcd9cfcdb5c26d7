"""Stopping a background task: cancel it, then wait until it has really finished.

Waiting matters: a task cancelled but not awaited may still be running its `finally` when
its owner closes what the task uses (the MongoDB client, a file), and asyncio warns about a
task destroyed while pending.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` (None or already done: nothing to do) and wait for it to end."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
