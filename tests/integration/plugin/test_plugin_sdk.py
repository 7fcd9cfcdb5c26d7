"""The evaluator contract a plugin author writes against: `handler(ctx, found)` always (a
handler that cannot take `found` is refused when the plugin loads, not at its first run),
and idle re-evaluations reach only the evaluators that declare an `idle_mark`, with the
reason in `ctx.trigger`."""

from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot import Context, Evaluator, Plugin, Trigger
from bot.llm.base import Task
from bot.plugin.loading import PluginError, Registry, discover
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel


async def only_ctx(ctx: Context) -> None:
    return None


async def ctx_and_found(ctx: Context, found: object) -> None:
    return None


async def found_has_a_default(ctx: Context, found: object = None) -> None:
    return None


async def takes_any(*args: Any) -> None:
    return None


async def three_required(ctx: Context, found: object, extra: object) -> None:
    return None


@pytest.mark.parametrize("handler", [ctx_and_found, found_has_a_default, takes_any])
def test_a_handler_taking_ctx_and_found_loads(handler: Any) -> None:
    registry = Registry()
    registry.add(Plugin("p", evaluators=[Evaluator("E", "d", handler)]), "test")
    assert [e.name for e in registry.evaluators] == ["E"]


@pytest.mark.parametrize(
    ("handler", "shown"), [(only_ctx, "(ctx)"), (three_required, "(ctx, found, extra)")]
)
def test_a_handler_that_cannot_take_found_is_refused_at_load_time(handler: Any, shown: str) -> None:
    with pytest.raises(PluginError) as refused:
        Registry().add(Plugin("p", evaluators=[Evaluator("LEARN", "d", handler)]), "test")
    message = str(refused.value)
    assert "plugin p (test)" in message and "'LEARN'" in message
    assert f"handler takes {shown}" in message
    assert "async def handler(ctx, found)" in message


def test_a_plugin_file_with_a_one_parameter_handler_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "counting.py").write_text(
        textwrap.dedent(
            """
            from bot import Evaluator, Plugin

            async def count(ctx):
                return None

            plugin = Plugin("counting", evaluators=[Evaluator("COUNT", "counts", count)])
            """
        )
    )
    with pytest.raises(PluginError, match=r"counting\.py.*handler takes \(ctx\)"):
        discover(tmp_path, use_entry_points=False)


@dataclass
class Runs:
    seen: list[tuple[str, Trigger, object]] = field(default_factory=list)

    def evaluator(self, name: str, *, idle_mark: str | None) -> Evaluator:
        async def validate(ctx: Context) -> str:
            return f"{name} found {ctx.message.content.text}"

        async def handler(ctx: Context, found: object) -> None:
            self.seen.append((name, ctx.trigger, found))

        return Evaluator(
            name, f"{name} learns", handler, validate, always_run=True, idle_mark=idle_mark
        )


async def test_idle_jobs_reach_only_evaluators_with_an_idle_mark(
    tmp_path: Path, model_dir: Path
) -> None:
    runs = Runs()
    plugin = Plugin(
        "p",
        evaluators=[
            runs.evaluator("CATCHES_UP", idle_mark="caught_up_to"),
            runs.evaluator("PER_MESSAGE", idle_mark=None),
        ],
    )
    model = ScriptedModel(answers={Task.REPLY: ['{"text": "Sure.", "action": "NONE"}']})
    async with open_test_app(
        tmp_path, plugins=[plugin], model=model, evaluator_selection="all"
    ) as app:
        chat = TestChat(app.runtime)
        message = chat.message("I moved to Porto")
        await chat.send(message)
        await chat.settle()
        # What the idle flush and /learn do: the room's latest message again, trigger "idle".
        assert await app.runtime.flush_room(message, timeout=30)

    found = "found I moved to Porto"
    assert runs.seen == [
        ("CATCHES_UP", "message", f"CATCHES_UP {found}"),
        ("PER_MESSAGE", "message", f"PER_MESSAGE {found}"),
        ("CATCHES_UP", "idle", f"CATCHES_UP {found}"),
    ]


async def test_apps_opened_by_the_harness_share_one_loaded_model_and_count_apart(
    tmp_path: Path, mongo_uri: str, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A plugin's suite boots an app per test: the embedding model is loaded once for the
    process, and each app's /stats and /metrics still count only its own embedding calls."""
    calls = []
    with caplog.at_level(logging.INFO, logger="bot.knowledge.onnx_embedder"):
        for name in ("first", "second"):
            async with open_test_app(
                tmp_path / name, mongodb_uri=mongo_uri, model_dir=model_dir
            ) as app:
                await app.embedder.embed([f"a text only the {name} app embeds"])
                calls.append(app.ledger.embedding_calls)
    loads = [r for r in caplog.records if r.getMessage().startswith("loaded all-MiniLM-L6-v2")]
    # Loaded at most once: by the first app, or already by an earlier test in this process.
    assert len(loads) <= 1
    # Each app's ledger holds its own one call, not the other's.
    assert calls == [1, 1]
