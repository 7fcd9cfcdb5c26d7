"""The `/privacy` answer: what is kept, where, for how long, and how to see, export, delete
or stop it. The operator may replace it (MNEMO_PRIVACY_TEXT / MNEMO_PRIVACY_FILE): Discord
requires bots with the message content intent to have a privacy policy, and that policy is
the operator's to write. The built-in text names only commands this bot really has."""

from __future__ import annotations

from collections.abc import Collection

from bot.privacy.consent import LearningState
from bot.privacy.retention import Retention


def built_in_notice(
    *, bot_name: str, retention: Retention, commands: Collection[str], state: LearningState
) -> str:
    lines = [
        f"Privacy: what {bot_name} keeps and how you control it.",
        "",
        "What I keep: the messages people send where I can read them and my replies, each "
        "person's name and username, and the facts I learn from the conversation "
        "(and whatever my plugins keep). All of it stays in the server, group or DM where it "
        "was said: it is never shown or used anywhere else. It is stored in this bot's "
        "database (MongoDB) and search index (Chroma), run by this bot's operator; to reply "
        "and to learn, the text is sent to the AI model the bot uses.",
        "",
        "How long: "
        + (
            f"messages are deleted after {retention.describe()}; "
            if retention.enabled
            else "messages are kept until they are deleted; "
        )
        + "facts stay until you delete them.",
    ]
    see = ["/me shows what I know about you here"]
    export = next((name for name in ("export", "mydata") if name in commands), None)
    if export is not None:
        see.append(f"/{export} sends you all of it as a file")
    lines.append("See it: " + "; ".join(see) + ".")
    if "forgetme" in commands:
        lines.append(
            "Delete it: /forgetme deletes everything I know about you here, your messages "
            "and my replies to them included."
        )
    if "optout" in commands:
        lines.append(
            "Stop it: /optout and I keep nothing you say here from then on (/optin to "
            "resume). Admins can turn learning off for a channel or the whole server with "
            "/learning off."
        )
    lines += ["", "Here, now: " + describe_state(state)]
    return "\n".join(lines)


def describe_state(state: LearningState) -> str:
    if state.person_off:
        return "you opted out, so I keep nothing you say here."
    if state.world_off:
        return "learning is off for this whole server or group, so I keep nothing said here."
    if state.room_off:
        return "learning is off in this chat, so I keep nothing said here."
    return "I am learning from what is said here."
