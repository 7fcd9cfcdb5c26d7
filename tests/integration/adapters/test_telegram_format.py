"""Telegram shows the model's Markdown formatted, never as raw asterisks: rendered to Telegram's
HTML, in parts that are each valid on their own, plain text when Telegram refuses the HTML,
people's names shown as typed. Against the fake Bot API, which reads HTML as Telegram does
(unknown tags, unclosed tags, code holding entities and stray "&" are refused), and through
python-telegram-bot's AIORateLimiter for flood waits."""

from __future__ import annotations

import re

import pytest

from bot.adapters.telegram.markdown import plain_text, to_telegram_html, units
from bot.domain.records import world_id
from bot.llm.base import Task
from bot.testing.scripted import ScriptedModel
from tests.fakes.telegram_server import FakeTelegramServer, parse_telegram_html
from tests.helpers.telegram_bot import REMEMBER, OpenBot, open_bot, server  # noqa: F401 (fixtures)

MODEL_MARKDOWN = """## Your plan

**Week 1:** run *three* times, `5 km` each.

- Monday: easy run
- Thursday: [intervals](https://example.com/run?a=1&b=2)
  1. warm up
  2. 6 × 400 m

> Listen to your body.

```python
if pace < 6:
    print("slow down")
```
~~No~~ rest days matter, Sam & Co <3"""


async def test_the_models_markdown_arrives_formatted_not_as_asterisks(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah = server.user("Sarah")
    dm = server.private_chat(sarah)
    async with open_bot(model=ScriptedModel(answers={Task.REPLY: [MODEL_MARKDOWN]})):
        server.push_message(dm, sarah, "make me a running plan")
        [reply] = await server.wait_for_sent(1)
    assert reply.parse_mode == "HTML"
    shown = reply.text
    for raw in ("**", "##", "```", "~~", "](", "> Listen"):
        assert raw not in shown, raw
    assert "Your plan" in shown and "• Monday: easy run" in shown and "1. warm up" in shown
    assert 'print("slow down")' in shown and "if pace < 6:" in shown
    assert shown.endswith("rest days matter, Sam & Co <3")
    formatted = set(reply.formatted)
    assert {("b", "Your plan"), ("b", "Week 1:"), ("i", "three"), ("code", "5 km")} <= formatted
    assert ("a", "intervals") in formatted and ("blockquote", "Listen to your body.") in formatted
    assert ("s", "No") in formatted
    assert reply.html is not None and 'href="https://example.com/run?a=1&amp;b=2"' in reply.html


async def test_a_long_formatted_reply_is_cut_between_tags_into_valid_parts(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah = server.user("Sarah")
    dm = server.private_chat(sarah)
    # One bold paragraph longer than two messages, then a long code block: every cut falls
    # inside a tag, and each part must still be HTML Telegram accepts.
    # (Under the 16,000 characters a reply may have: the cut is Telegram's, not the runtime's.)
    bold = "**" + " ".join(f"step{i} & <more>" for i in range(450)) + "**"
    code = "```\n" + "\n".join(f"line {i} <tag> & x" for i in range(300)) + "\n```"
    reply = f"{bold}\n\n{code}"
    assert len(reply) < 16_000
    async with open_bot(model=ScriptedModel(answers={Task.REPLY: [reply]})) as bot:
        server.push_message(dm, sarah, "everything, please")
        parts = await server.wait_for_sent(len(to_telegram_html(reply)), timeout=20)
        await bot.adapter.wait_idle()
    assert len(server.sent) == len(parts) >= 4
    assert all(p.parse_mode == "HTML" and units(p.text) <= 4096 for p in parts)
    assert all(p.html is not None and units(p.html) <= 4096 for p in parts)
    shown = "\n".join(p.text for p in parts)
    words = re.findall(r"step\d+", shown)
    assert words == [f"step{i}" for i in range(450)]  # all of it, in order, once
    assert re.findall(r"line \d+", shown) == [f"line {i}" for i in range(300)]
    # The cut bold paragraph is bold in each of its parts; the code stays code.
    bold_parts = [p for p in parts if "step" in p.text]
    assert len(bold_parts) >= 2 and all(kind == "b" for p in bold_parts for kind, _ in p.formatted)
    code_parts = [p for p in parts if "line " in p.text]
    assert all({kind for kind, _ in p.formatted} == {"code", "pre"} for p in code_parts)


async def test_a_reply_telegram_refuses_as_html_arrives_as_plain_text(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah = server.user("Sarah")
    dm = server.private_chat(sarah)
    server.refuse_html = True
    async with open_bot(model=ScriptedModel(answers={Task.REPLY: [MODEL_MARKDOWN]})):
        server.push_message(dm, sarah, "make me a running plan")
        [reply] = await server.wait_for_sent(1)
    assert reply.parse_mode is None
    assert "Your plan" in reply.text and "**" not in reply.text and "<b>" not in reply.text
    assert "Sam & Co <3" in reply.text and "&amp;" not in reply.text


async def test_names_and_our_own_text_are_shown_as_typed(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    odd = server.user("<b>Eve</b> & *Co*", username="eve")
    boss = server.user("Boss")
    group = server.group("Book club")
    # The model repeats the name: it is text, not markup, in the HTML reply.
    model = ScriptedModel(answers={Task.REPLY: ["Hi <b>Eve</b> & *Co*!"]})
    async with open_bot(model=model, plugins=[REMEMBER], admin_ids=[str(boss.id)]) as bot:
        greeting = await bot.said(group, odd, "@mnemo_bot I knit")
        await bot.settle(group)
        listing = await bot.said(group, boss, "/facts")
    assert greeting.parse_mode == "HTML" and "Hi <b>Eve</b> & Co!" in greeting.text
    assert ("i", "Co") in greeting.formatted and not any(k == "b" for k, _ in greeting.formatted)
    # A command's answer is our own text: the name exactly as Telegram has it, never markup
    # (only the fact's id is formatted, as code).
    assert listing.parse_mode == "HTML"
    assert "— about <b>Eve</b> & *Co*" in listing.text
    assert {tag for tag, _ in listing.formatted} == {"code"}


async def test_a_flood_wait_is_waited_out_by_the_rate_limiter_and_nothing_is_lost(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    sarah = server.user("Sarah")
    dm = server.private_chat(sarah)
    server.flood_waits, server.flood_wait_seconds = 2, 1
    async with open_bot(model=ScriptedModel(answers={Task.REPLY: ["Hello **there**"]})):
        server.push_message(dm, sarah, "hi")
        [reply] = await server.wait_for_sent(1, timeout=15)
        await server.drained()
    assert reply.text == "Hello there" and len(server.sent) == 1
    # Two "retry after 1" answers, each waited out: no call came before its wait was up.
    assert len(server.calls_to("sendMessage")) == 3
    assert server.early_retries == 0


# --------------------------------------------------------------------------- the renderer
@pytest.mark.parametrize(
    "markdown",
    [
        MODEL_MARKDOWN * 40,
        "**" + "é🙂 " * 3000 + "**",
        "> " + "quoted & <x> " * 900,
        "- " + "\n- ".join(f"item **{i}** `c{i}`" for i in range(900)),
        "[" + "link " * 1000 + "](https://example.com)",
        "x" * 9000,
        "**bold *nested `code` here* more**",
        "# A heading with `code`\n\n> a quote with\n> ```\n> code\n> ```",
        "[" + "long link text " * 300 + "](https://example.com/" + "x" * 4000 + ")",
    ],
)
def test_every_part_is_html_telegram_accepts_and_within_the_limit(markdown: str) -> None:
    parts = to_telegram_html(markdown)
    assert parts
    for part in parts:
        assert units(part) <= 4096
        shown, _ = parse_telegram_html(part)  # raises on what Telegram would refuse
        assert shown == plain_text(part)


async def test_command_answers_show_ids_as_code_and_names_as_typed(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    # A name and words that Markdown would read as formatting: an answer shows them as written.
    sam = server.user("Sam *the* _great_", username="sam")
    boss = server.user("Boss")
    group = server.group("Book club")
    async with open_bot(plugins=[REMEMBER], admin_ids=[str(boss.id)]) as bot:
        await bot.said(group, sam, "@mnemo_bot I like 2*3 and snake_case_names <b>")
        await bot.settle(group)
        [fact], _ = await bot.app.store.facts.page(world_id("telegram", group.id))
        listing = await bot.said(group, boss, "/facts")
        me = await bot.said(group, sam, "/me")
    short_id = fact.id[:8]
    for answer in (listing, me):
        assert answer.parse_mode == "HTML"
        assert "`" not in answer.text  # no literal backticks around the id
        assert ("code", short_id) in answer.formatted
        assert "said @mnemo_bot I like 2*3 and snake_case_names <b>" in answer.text
    assert "about Sam *the* _great_" in listing.text
    # Only the id is formatted: the name's and the fact's marks are not italics or bold.
    assert {tag for tag, _ in listing.formatted} == {"code"}
