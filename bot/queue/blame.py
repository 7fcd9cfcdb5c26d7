"""Who is to blame for a crash: which jobs a dead process left `running`, and which of them the
crash counts as an attempt against (bot/queue/worker.py reclaims them)."""

from __future__ import annotations

from collections.abc import Collection

from bot.storage.jobs import Running


def blame(
    running: list[Running],
    alive: Collection[str],
    me: str,
    active: Collection[str],
    busy: Collection[str] = (),
) -> tuple[list[Running], set[str]]:
    """Which `running` jobs were interrupted, and which of those a crash is charged to.

    A job of another process is interrupted once that process is gone (its process lease
    expired; `alive` are the owners whose lease is live). A job of this process is
    interrupted when this process is not running it (a write that failed left it `running`).
    A crash is charged to a job that was the only thing its process was doing: the only job
    it was running, and no message of its in intake (`busy` are the owners that were taking
    a message in). A crash mid-message may as well have been the message's: charging the
    evaluation beside it let a run of such crashes leave an innocent job dead (in the fault
    suite, the first job ran beside each of the first kills). Not charged is not free:
    JobStore.recover_interrupted also ends a crash loop on a job that is never alone.
    """
    by_owner: dict[str, list[Running]] = {}
    for job in running:
        by_owner.setdefault(job.owner, []).append(job)
    interrupted: list[Running] = []
    charged: set[str] = set()
    for owner, jobs in by_owner.items():
        if owner == me:
            interrupted.extend(job for job in jobs if job.id not in active)
            continue
        if owner in alive:
            continue
        interrupted.extend(jobs)
        if len(jobs) == 1 and owner not in busy:
            charged.add(jobs[0].id)
    return interrupted, charged
