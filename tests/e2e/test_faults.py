"""The fault suite: a real Mnemo process is killed (SIGKILL, through the test-only fault hook
MNEMO_TEST_FAULT) at each step of handle() and of an evaluation, its Chroma folder is wiped,
and after recovery nothing is lost or duplicated. `mnemo bench faults` runs it at scale."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.faults import FAULT_POINTS, run_faults

# Report fields that vary from run to run: how often evaluators ran, and how long recovery took.
WITHOUT_A_TARGET = {"evaluator_runs", "recover_seconds"}


@pytest.mark.skipif(
    bool(os.environ.get("MNEMO_TEST_MONGODB_URI")), reason="the workers use the bundled server"
)
@pytest.mark.slow
def test_kill_9_at_every_step_loses_and_duplicates_nothing(tmp_path: Path, model_dir: Path) -> None:
    # With the default cap of 5 attempts. A crash is charged only to a job that was the only
    # thing its process was doing (bot/queue/blame.py): at the handle points the process was
    # answering a message, so the evaluation that runs first after each restart (and so is
    # running at most kills) is not charged, and seven kills leave no innocent job dead.
    # Each point fires on its 2nd reach, so the worker dies mid-script with work behind it
    # (four messages a room, so the later points still have work left to reach them: with
    # three, the last two points were no longer reached a second time).
    # At `handle:reply-sent` the reply went out and was not settled: the restart must store
    # it from the record of sent replies, not answer again (a duplicate).
    report = run_faults(
        tmp_path, rooms=2, messages=4, faults=[f"{p}@2" for p in FAULT_POINTS], seed=7
    )
    counts = {
        name: value for name, value in report.as_dict().items() if name not in WITHOUT_A_TARGET
    }
    assert counts == {
        "rooms": 2,
        "sent": 8,
        "stored": 8,
        "answered": 8,
        "evaluated": 8,
        "lost": 0,
        "duplicated": 0,
        "vectors": 8,  # rebuilt after the Chroma folder was wiped
        "dead_jobs": 0,
        "kills": len(FAULT_POINTS),  # every fault point was reached and killed
    }
