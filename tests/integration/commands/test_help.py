"""/help as people read it: `/facts history` is for everyone (their own history), so it is
shown to everyone on its own line and never under an "Admins:" label."""

from __future__ import annotations

from pathlib import Path

from bot.commands.command_set import Commands, Request
from bot.testing.harness import TestChat, open_test_app
from bot.testing.scripted import ScriptedModel


async def test_facts_history_is_listed_for_everyone_and_not_labelled_admins(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    model = ScriptedModel(lambda prompt, task, state: '{"text": "Noted."}')
    async with open_test_app(
        tmp_path, model=model, model_dir=model_dir, mongodb_uri=mongo_uri
    ) as app:
        chat = TestChat(app.runtime, name="Sam", chat="here")
        commands = Commands(app.commands, learn_wait=5)
        where = {
            "platform": "test",
            "account_id": chat.account.id,
            "world_id": chat.room.world_id,
            "room_id": chat.room.id,
        }
        member = (await commands.run("help", Request(**where, is_admin=False))).text
        admin = (await commands.run("help", Request(**where, is_admin=True))).text
        # What /help promises works for a member: their own history, not a refusal.
        history = await commands.run("facts", Request(**where, is_admin=False, args="history"))
    member_lines = member.splitlines()
    [line] = [x for x in member_lines if x.startswith("/facts")]
    assert line.startswith("/facts history") and "Admins" not in line
    assert "only for admins" not in history.text
    # Admins see both forms; the history line is still not labelled "Admins:".
    admin_facts = [x for x in admin.splitlines() if x.startswith("/facts")]
    assert len(admin_facts) == 2
    [history_line] = [x for x in admin_facts if x.startswith("/facts history")]
    assert "Admins:" not in history_line
    assert not any("| history" in x for x in admin_facts)
