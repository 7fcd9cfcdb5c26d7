"""The multi-process test's probe (tests/e2e/test_multiprocess.py): an evaluator that records every
run it makes, and its effect once per job (keyed by the job id, the idempotency key), with the
process that ran it. MNEMO_TEST_PROBE_SECONDS makes each run take that long, as a model call
would, so a process's rooms have evaluations queued when it is killed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

from pymongo.errors import DuplicateKeyError

from bot.plugin.api import Context, Evaluator, Plugin, PluginContext

SECONDS = float(os.environ.get("MNEMO_TEST_PROBE_SECONDS", "0") or 0)


async def record(ctx: Context, found: object) -> None:
    await asyncio.sleep(SECONDS)
    run = {
        "job": ctx.job_id,
        "user_id": ctx.message.user_id,
        "world_id": ctx.message.world_id,
        "room": ctx.message.room_id,
        "message": ctx.message.id,
        "pid": os.getpid(),
        "at_ns": time.time_ns(),
    }
    # Copies: insert_one adds an `_id` to the document it is given.
    await ctx.collections["runs"].insert_one(dict(run))
    # Keyed by the job: a re-run of a job whose effect is there already changes nothing.
    with contextlib.suppress(DuplicateKeyError):
        await ctx.collections["effects"].insert_one({"_id": ctx.job_id, **run})


async def forget(ctx: PluginContext, person_id: str, world_id: str) -> int:
    mine = {"user_id": person_id, "world_id": world_id}
    removed = 0
    for name in STORES:
        removed += (await ctx.collections[name].delete_many(mine)).deleted_count
    return removed


async def export(ctx: PluginContext, person_id: str, world_id: str) -> dict[str, int]:
    mine = {"user_id": person_id, "world_id": world_id}
    return {name: await ctx.collections[name].count_documents(mine) for name in STORES}


STORES = ["runs", "effects"]
plugin = Plugin(
    "probe",
    description="records each evaluation (multi-process test)",
    evaluators=[Evaluator("PROBE", "records each evaluation", record, always_run=True)],
    stores=STORES,
    forget=forget,
    export=export,
)
