"""The fault suite: a real Mnemo process is killed (SIGKILL, through the test-only fault hook
MNEMO_TEST_FAULT) at each step of handle() and of an evaluation, its Chroma folder is wiped,
and after recovery nothing is lost or duplicated. `mnemo bench faults` runs it at scale."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.faults import FAULT_POINTS, run_faults


@pytest.mark.skipif(
    bool(os.environ.get("MNEMO_TEST_MONGODB_URI")), reason="the workers use the bundled server"
)
def test_kill_9_at_every_step_loses_and_duplicates_nothing(tmp_path: Path, model_dir: Path) -> None:
    # With the default cap of 5 attempts: a crash is charged only to a job that was running
    # alone (bot/queue/blame.py), so six kills leave no innocent neighbour dead.
    # Each point fires on its 2nd reach, so the worker dies mid-script with work behind it
    # (three messages a room, so the later points still have work left to reach them).
    # At `handle:reply-sent` the reply went out and was not settled: the restart must store
    # it from the record of sent replies, not answer again (a duplicate).
    report = run_faults(
        tmp_path, rooms=2, messages=3, faults=[f"{p}@2" for p in FAULT_POINTS], seed=7
    )
    assert report.kills == len(FAULT_POINTS)  # every fault point was reached and killed
    assert (report.sent, report.stored, report.answered, report.evaluated) == (6, 6, 6, 6)
    assert (report.lost, report.duplicated, report.dead_jobs) == (0, 0, 0)
    assert report.vectors == 6  # rebuilt after the Chroma folder was wiped
