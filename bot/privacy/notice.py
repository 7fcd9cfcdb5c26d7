"""The `/privacy` answer: what is kept, where, for how long, and how to see, export, delete
or stop it. The operator may replace it (MNEMO_PRIVACY_TEXT / MNEMO_PRIVACY_FILE): Discord
requires bots with the message content intent to have a privacy policy, and that policy is
the operator's to write. The built-in text names only commands this bot really has."""

from __future__ import annotations

from collections.abc import Collection

from bot.i18n import SOURCE_TEXTS, Texts
from bot.privacy.consent import LearningState
from bot.privacy.retention import Retention


def built_in_notice(
    *,
    bot_name: str,
    retention: Retention,
    commands: Collection[str],
    state: LearningState,
    texts: Texts = SOURCE_TEXTS,
) -> str:
    kept = texts.gettext(
        "What I keep: the messages people send where I can read them and my replies, each "
        "person's name and username, and the facts I learn from the conversation "
        "(and whatever my plugins keep). All of it stays in the server, group or DM where it "
        "was said: it is never shown or used anywhere else. It is stored in this bot's "
        "database (MongoDB) and search index (Chroma), run by this bot's operator; to reply "
        "and to learn, the text is sent to the AI model the bot uses."
    )
    if retention.enabled:
        deleted = texts.gettext("messages are deleted after {period}; ").format(
            period=retention.describe(texts)
        )
    else:
        deleted = texts.gettext("messages are kept until they are deleted; ")
    how_long = texts.gettext("How long: {messages}facts stay until you delete them.")
    lines = [
        texts.gettext("Privacy: what {name} keeps and how you control it.").format(name=bot_name),
        "",
        kept,
        "",
        how_long.format(messages=deleted),
    ]
    see = [texts.gettext("/me shows what I know about you here")]
    export = next((name for name in ("export", "mydata") if name in commands), None)
    if export is not None:
        see.append(texts.gettext("/{command} sends you all of it as a file").format(command=export))
    lines.append(texts.gettext("See it: {ways}.").format(ways="; ".join(see)))
    if "forgetme" in commands:
        lines.append(
            texts.gettext(
                "Delete it: /forgetme deletes everything I know about you here, your messages "
                "and my replies to them included."
            )
        )
    if "optout" in commands:
        lines.append(
            texts.gettext(
                "Stop it: /optout and I keep nothing you say here from then on (/optin to "
                "resume). Admins can turn learning off for a channel or the whole server with "
                "/learning off."
            )
        )
    lines += ["", here_now(state, texts)]
    return "\n".join(lines)


def here_now(state: LearningState, texts: Texts = SOURCE_TEXTS) -> str:
    """ "Here, now: I am learning from what is said here." """
    return texts.gettext("Here, now: {state}").format(state=describe_state(state, texts))


def describe_state(state: LearningState, texts: Texts = SOURCE_TEXTS) -> str:
    if state.person_off:
        return texts.gettext("you opted out, so I keep nothing you say here.")
    if state.world_off:
        return texts.gettext(
            "learning is off for this whole server or group, so I keep nothing said here."
        )
    if state.room_off:
        return texts.gettext("learning is off in this chat, so I keep nothing said here.")
    return texts.gettext("I am learning from what is said here.")
