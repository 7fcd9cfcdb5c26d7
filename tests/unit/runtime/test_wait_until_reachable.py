"""`mnemo run` waits for an external MongoDB that is down at start-up: it retries with a
doubling pause and one log line per attempt, and does not wait for what waiting cannot fix."""

from __future__ import annotations

import logging

import pytest
from pymongo.errors import ConnectionFailure, OperationFailure

from bot.runtime.intake.outage import wait_until_reachable
from bot.storage.mongo import StorageUnavailable


class FlakyPing:
    """Fails as an unreachable MongoDB does (StorageUnavailable from a ConnectionFailure)
    `failures` times, then answers."""

    def __init__(self, failures: int, cause: Exception | None = None) -> None:
        self.failures = failures
        self.cause = cause if cause is not None else ConnectionFailure("connection refused")
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            try:
                raise self.cause
            except Exception:
                raise StorageUnavailable("MongoDB at localhost:1 is unreachable") from None


async def test_an_unreachable_database_is_waited_for_with_a_doubling_pause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ping = FlakyPing(failures=3)
    with caplog.at_level(logging.INFO, logger="bot.runtime.intake.outage"):
        await wait_until_reachable(ping, first_delay=0.01, max_delay=0.02)
    assert ping.calls == 4
    waits = [r.getMessage() for r in caplog.records if "waiting for it" in r.getMessage()]
    assert [w.split("(")[1] for w in waits] == [
        "attempt 1, next in 0 s)",
        "attempt 2, next in 0 s)",
        "attempt 3, next in 0 s)",
    ]
    assert all("unreachable" in w for w in waits)
    assert "MongoDB answers after 4 attempts: starting" in caplog.text


async def test_the_pause_doubles_up_to_its_cap(caplog: pytest.LogCaptureFixture) -> None:
    ping = FlakyPing(failures=3)
    with caplog.at_level(logging.ERROR, logger="bot.runtime.intake.outage"):
        await wait_until_reachable(ping, first_delay=0.4, max_delay=1.0)
    nexts = [r.args[-1] for r in caplog.records if "waiting for it" in r.getMessage()]
    assert nexts == [0.4, 0.8, 1.0]


async def test_a_reachable_database_starts_at_once_without_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ping = FlakyPing(failures=0)
    with caplog.at_level(logging.INFO, logger="bot.runtime.intake.outage"):
        await wait_until_reachable(ping, first_delay=10.0)
    assert ping.calls == 1
    assert caplog.records == []


async def test_refused_credentials_are_not_waited_for() -> None:
    ping = FlakyPing(failures=5, cause=OperationFailure("Authentication failed", code=18))
    with pytest.raises(StorageUnavailable):
        await wait_until_reachable(ping, first_delay=10.0)
    assert ping.calls == 1
