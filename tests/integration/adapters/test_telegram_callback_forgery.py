"""Forged callback data cannot answer another person's /forgetme prompt (issue 19, finding 6).

A user-API client can send any callback data for any message. The audit pressed "yes" on
Sarah's prompt with data naming the forger: the bot checked only that the data named the
presser, forgot the forger, and overwrote Sarah's prompt with "Done: I forgot ...". Now the
data must be one of the buttons the bot put on that very message. python-telegram-bot's real
code against the local fake Bot API.
"""

from __future__ import annotations

from bot.adapters.telegram import FORGET_PROMPT
from bot.domain.records import account_id, room_id, world_id
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.telegram_bot import REMEMBER, OpenBot, open_bot, server  # noqa: F401 (fixtures)


async def test_forged_callback_data_cannot_answer_another_persons_prompt(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah, tom = server.user("Sarah"), server.user("Tom")
    group = server.group("Book club")
    async with open_bot(plugins=[REMEMBER]) as bot:
        server.push_message(group, tom, "I live in Oslo")
        prompt = await bot.said(group, sarah, "/forgetme")
        assert prompt.text == FORGET_PROMPT
        room = room_id("telegram", group.id)
        before = await bot.app.store.memories.count_in_room(room)

        # Tom's client sends data naming himself, for the message holding Sarah's buttons.
        server.push_callback(tom, prompt, f"forgetme:yes:{tom.id}")
        [answer] = await server.wait_for_calls("answerCallbackQuery", 1)
        await bot.settle(group)

        assert "not valid" in str(answer.params.get("text"))
        assert server.calls_to("editMessageText") == []  # Sarah's prompt stands
        assert await bot.app.store.memories.count_in_room(room) == before
        tom_said = await bot.app.store.memories.by(
            user_id=account_id("telegram", tom.id), world_id=world_id("telegram", group.id)
        )
        assert [m.content.text for m in tom_said] == ["I live in Oslo"]

        # Sarah's own button still works.
        buttons = prompt.reply_markup["inline_keyboard"][0]  # type: ignore[index]
        yes = next(b["callback_data"] for b in buttons if b["text"].startswith("Yes"))
        server.push_callback(sarah, prompt, yes)
        [edit] = await server.wait_for_calls("editMessageText", 1)
        assert edit.params["text"].startswith("Done: I forgot")
