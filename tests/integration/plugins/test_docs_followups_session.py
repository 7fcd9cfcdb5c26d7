"""docs/followups.md's opening session, and the README's, as the console prints them: each
`you>` line typed, each other line what Mnemo printed, and the `(Saturday, 10:00)` line the
moment the clock is moved to before the plugin's timed task runs. The offline model answers
(no key is set); the clock is the plugin's own, injected; real MongoDB and Chroma."""

from __future__ import annotations

import io
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.adapters.console import ConsoleChat
from bot.testing.harness import open_test_app
from plugins.followups import make_plugin
from plugins.followups.prompts import plain_question
from tests.helpers.doc_snippets import fenced_blocks, snippet
from tests.helpers.followups import WEDNESDAY, Clock
from tests.paths import REPO

FOLLOWUPS_DOC = REPO / "docs" / "followups.md"
_MOMENT = re.compile(r"\s+\((?P<day>[A-Z][a-z]+day), (?P<hour>\d\d):(?P<minute>\d\d)\)")
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def plain_questions(name: str, topic: str, when: str) -> set[str]:
    """Every wording of the offline follow-up for an event (one per follow-up id), as the
    console prints it."""
    data = {"name": name, "topic": topic, "when": when}
    return {f"Mnemo: {plain_question({**data, 'id': str(n)})}" for n in range(64)}


def next_moment(after: datetime, day: str, hour: int, minute: int) -> datetime:
    """The first `day` at hour:minute (UTC, the plugin's default zone) after `after`."""
    ahead = (_DAYS.index(day) - after.weekday()) % 7
    moment = (after + timedelta(days=ahead)).replace(hour=hour, minute=minute)
    return moment if moment > after else moment + timedelta(days=7)


async def play(
    session: list[str], tmp_path: Path, mongo_uri: str, model_dir: Path, *, first: str = ""
) -> None:
    """Type the session's `you>` lines into the console (after `first`, a command whose answer
    the session does not show) and check that it prints the session's other lines."""
    clock = Clock()  # Wednesday 25 November 2026, noon: the session's day
    assert datetime.fromtimestamp(clock.ms / 1000, UTC) == WEDNESDAY
    read, write = os.pipe()  # standard input that waits, like a person at the prompt
    out = io.StringIO()
    expected: list[str] = []
    asked: set[str] = set()  # the lines said when a moment came
    async with open_test_app(
        tmp_path, plugins=[make_plugin(clock=clock)], mongodb_uri=mongo_uri, model_dir=model_dir
    ) as app:
        assert app.offline
        console = ConsoleChat(
            user_name="sarah", display_name="Sarah", stdin=os.fdopen(read), stdout=out
        )
        await console.start(app.adapter_services)
        try:
            if first:
                assert await console.command(first)
                out.seek(0)
                out.truncate()
            for index, line in enumerate(session):
                if line.startswith("you> "):
                    typed = line.removeprefix("you> ")
                    if typed.startswith("/"):
                        assert await console.command(typed)
                    else:
                        await console.chat(typed)
                        assert await app.runtime.evaluations.join(console.room.id, 60)
                elif moment := _MOMENT.fullmatch(line):
                    asked.update(session[index + 1 : index + 2])
                    now = datetime.fromtimestamp(clock.ms / 1000, UTC)
                    when = next_moment(
                        now, moment["day"], int(moment["hour"]), int(moment["minute"])
                    )
                    clock.ms = int(when.timestamp() * 1000)
                    await app.runtime.plugins.run_tasks()
                else:
                    expected.append(line)
        finally:
            os.close(write)
            await console.stop()
    printed = out.getvalue().splitlines()
    assert len(printed) == len(expected), printed
    for shown, said in zip(expected, printed, strict=True):
        if shown in asked:
            # The follow-up's wording is one of the plugin's few, picked by the message's id
            # (random in the console): the page shows one, the console prints one.
            assert said in plain_questions("Sarah", "your exam", "on Friday"), said
            assert shown in plain_questions("Sarah", "your exam", "on Friday"), shown
        else:
            assert said == shown


async def test_the_followups_page_session_is_what_the_console_prints(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    session = snippet(FOLLOWUPS_DOC, "followups-session").text.splitlines()
    assert session[0] == "you> /followups on"
    await play(session, tmp_path, mongo_uri, model_dir)


async def test_the_readme_follow_up_is_what_the_console_prints_once_an_admin_turned_them_on(
    tmp_path: Path, mongo_uri: str, model_dir: Path
) -> None:
    """The README's short session; "(admins: `/followups on`)", its sentence says, first."""
    [session] = [
        block.text.splitlines()
        for block in fenced_blocks(REPO / "README.md")
        if block.text.startswith("you> My exam is on Friday!")
    ]
    await play(session, tmp_path, mongo_uri, model_dir, first="/followups on")
