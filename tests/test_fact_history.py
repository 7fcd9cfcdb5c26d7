"""`/facts_history`: how what Mnemo knows about someone changed, through the plugin command layer
every surface uses. Full app, offline model, bundled MongoDB, Chroma and the ONNX embedder."""

from __future__ import annotations

from pathlib import Path

from bot.testing.harness import TestChat, open_test_app
from plugins.facts import history_command, plugin


async def learn_each(chat: TestChat, *texts: str) -> None:
    for text in texts:
        said = chat.message(text)
        await chat.send(said)
        await chat.settle()
        assert await chat.runtime.flush_room(said, timeout=60)


async def test_history_shows_each_change_in_order_and_only_admins_see_others(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    async with open_test_app(
        tmp_path, plugins=[plugin], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        group = {"chat": "club", "world": "club", "kind": "group"}
        sarah = TestChat(app.runtime, name="Sarah", **group)
        tom = TestChat(app.runtime, name="Tom", **group)
        await learn_each(sarah, "I live in Seattle.", "I work at the bakery.")
        await learn_each(sarah, "I moved to Berlin.", "I no longer work at the bakery.")
        await learn_each(tom, "I live in York.")

        async def run(chat: TestChat, args: str, *, admin: bool) -> str:
            return await app.runtime.plugins.run_command(
                history_command,
                account_id=chat.account.id,
                world_id=chat.room.world_id,
                room_id=chat.room.id,
                args=args,
                is_admin=admin,
            )

        own = await run(sarah, "", admin=False)
        other = await run(tom, "Sarah", admin=False)
        as_admin = await run(tom, "sarah", admin=True)
        nobody = await run(tom, "Zed", admin=True)

    lines = own.splitlines()[1:]
    assert lines[0].startswith("• Sarah lives in Seattle (until ")
    assert lines[0].endswith(") → Sarah lives in Berlin")
    assert "Sarah works at the bakery (until " in lines[1] and "no longer true" in lines[1]
    assert "York" not in own
    assert other.startswith("Only admins")
    assert as_admin.splitlines()[1:] == lines
    assert nobody == "I know nothing about Zed here."
