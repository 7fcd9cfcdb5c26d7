"""The command layer: one command set, with the same names and meanings on every surface
(console, Discord, Telegram), the built-in ones and every plugin's.

A surface turns what a person typed (or picked, on Discord) into a `Request` - who asked,
where, whether they are an admin there, the text after the command - and shows the answer.
Everything else happens here, once:

- "wait for learning": before an answer about what was learned, the room learns from what
  was said and not yet learned from (as the idle flush would), within `learn_wait` seconds;
  then the answer shows what is known, noting when learning is still going on;
- "finish evaluations before forgetting": running evaluations of the room finish first, or
  they could learn again what is being forgotten;
- the one argument parser for `[@person | user id] [text] [page]`;
- admin-only commands are refused to others with one line.

Answers only ever read the world the command was issued in.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from bot.commands import world_choice
from bot.commands.fact_history import (
    SUBCOMMAND,
    asks_history,
    evidence_of,
    help_line,
    history_of,
    open_to_all,
    told_lines,
)
from bot.commands.parsing import command_parts, echo, parse_person_search_page  # noqa: F401
from bot.commands.services import CommandServices
from bot.commands.types import (  # noqa: F401  (surfaces import the layer's types from here)
    Answer,
    Attachment,
    CommandInfo,
    Request,
    ResolvePerson,
    Scope,
)
from bot.config.settings import PlatformSettings
from bot.domain.names import distinct
from bot.domain.records import Fact, account_id, utcnow
from bot.i18n import N_, SOURCE_TEXTS, Texts
from bot.ops.spend import describe_caps, describe_usage, usage_in_world
from bot.privacy import commands as privacy_commands
from bot.privacy.export import Exporting, PersonalData, told_name_line
from bot.privacy.forgetting import Forgetting, Forgotten
from bot.privacy.ledger import ForgetLedger
from bot.queue.worker import describe_queue
from bot.runtime.composing import FRESH_START
from bot.runtime.intake.outage import DATABASE_AWAY
from bot.storage.rejects import describe_rejects

log = logging.getLogger(__name__)

PAGE_SIZE = 10
# The bot's own replies are not learned from: the last person's message is found among these.
RECENT_FOR_LEARNING = 10
# The answers' texts are in English, the catalogs' source language (bot/i18n): each is looked
# up in the asker's language where it is shown (`Commands.texts`).
STILL_LEARNING = N_("(still learning from the latest messages)")
FORGET_ME_PROMPT = N_(
    "This deletes everything I learned about you here, your messages and my replies to them, "
    "and what my plugins keep about you here. It cannot be undone."
)
# How a done /forgetme begins (the console tells it from the prompt by it).
FORGOTTEN = N_("Done: I forgot")
ONLY_ADMINS_FORGET_PEOPLE = N_("Only admins can forget someone else; /forgetme forgets you.")
CONFIRM_BY_TEXT = N_('send the same command with "yes" at the end')
CONFIRM_BY_BUTTON = N_("press the button")
FORGET_FAILED = N_(
    "Sorry, forgetting did not finish (the details are in the bot's log); nothing is reported "
    "as forgotten. Please try again in a moment."
)
FRESH_START_DONE = N_(
    "Fresh start: from now on my replies here leave our earlier conversation aside. "
    "What I learned stays (/me shows it, /forgetme forgets it)."
)
# A built-in command's handler, given the catalog of the asker's language; plain text is an
# answer everyone may see.
Handler = Callable[[Request, Texts], Awaitable[str | Answer]]

# The descriptions are shown translated (/help, Telegram's menu in each language).
BUILT_IN: tuple[CommandInfo, ...] = (
    CommandInfo("me", N_("What I know about you here"), slow=True),
    CommandInfo("forgetme", N_("Forget everything about you here"), usage="[yes]", slow=True),
    CommandInfo("export", N_("Everything I keep about you here, as a file sent to you"), slow=True),
    CommandInfo("mydata", N_("The same as /export"), slow=True),
    CommandInfo("help", N_("What I can do")),
    CommandInfo("reset", N_("Start afresh here: my replies leave our earlier conversation aside")),
    CommandInfo("new", N_("The same as /reset")),
    CommandInfo(
        "facts",
        N_("Admins: facts learned here"),
        usage="[@user] [text] [page]",
        admin_only=True,
        slow=True,
    ),
    CommandInfo(
        "forget",
        N_("Forget one of your facts (its id, from /me); admins: any fact, or a person (@user)"),
        usage="<fact id | @user> [yes]",
        slow=True,
    ),
    CommandInfo("stats", N_("Admins: what I have learned here"), admin_only=True, slow=True),
    *(CommandInfo(**command) for command in privacy_commands.COMMANDS),  # /privacy, /optout, ...
    *world_choice.COMMANDS,  # /character, /model
)


class Commands:
    """Every command a person can use, and what each one answers."""

    def __init__(
        self, services: CommandServices, *, learn_wait: float = 30.0, outage_wait: float = 2.0
    ) -> None:
        self.services = services
        # How long an answer about what was learned waits for the room's learning.
        self.learn_wait = learn_wait
        # How long a command waits for the database and the journal's replay
        # (bot/runtime/intake/outage.py).
        self.outage_wait = outage_wait
        self.forgetting = forgetting_of(services, wait_for_learning=learn_wait)
        self.exporting = Exporting(
            store=services.store, plugins=services.plugins, agent_id=services.agent_id
        )
        self._built_in: dict[str, Handler] = {
            "help": self._help,
            "reset": self._fresh_start,
            "new": self._fresh_start,
            "me": self._me,
            "forgetme": self._forget_me_command,
            "facts": self._facts,
            "forget": self._forget,
            "stats": self._stats,
            **privacy_commands.handlers(services.privacy, self._bot_name_in, self.all),
            "export": self._export,
            "mydata": self._export,
            **world_choice.handlers(services.worlds, services.model, services.languages),
        }

    async def _bot_name_in(self, world_id: str) -> str:
        """The bot's name in a world: the character its admins chose there (`/character`)."""
        return (await self.services.worlds.of(world_id)).character.name

    # ------------------------------------------------------------------ the command set
    def all(self) -> list[CommandInfo]:
        """Built-in commands, then every plugin's, in registration order."""
        found = list(BUILT_IN)
        for command in self.services.plugins.commands():
            if command.name in self._built_in:
                log.warning("plugin command /%s is hidden by the built-in one", command.name)
                continue
            found.append(
                CommandInfo(
                    command.name,
                    command.description,
                    usage=command.usage,
                    admin_only=command.admin_only,
                    slow=command.after_learning,
                )
            )
        return found

    def find(self, name: str) -> CommandInfo | None:
        wanted = name.strip().lstrip("/").split("@", 1)[0].casefold()
        return next((c for c in self.all() if c.name == wanted), None)

    async def texts(self, request: Request) -> Texts:
        """The catalog of the asker's language: the world's (/language), else their app's,
        else the operator's. While the database is away, without reading it."""
        languages = self.services.languages
        outage = self.services.outage
        if outage is not None and outage.waiting:
            return languages.texts_now(request.world_id, request.locale)
        return await languages.texts(request.world_id, request.locale)

    async def run(self, name: str, request: Request) -> Answer:
        """The answer to `/name`: a refusal or a one-line apology, never an exception."""
        texts = await self.texts(request)
        info = self.find(name)
        if info is None:
            unknown = texts.gettext("Unknown command {command}. Try /help.")
            return Answer(unknown.format(command=echo(name, 32)))
        if info.admin_only and not request.is_admin and not open_to_all(info.name, request.args):
            log.info("%s: refused /%s to %s", request.platform, info.name, request.account_id)
            return Answer(
                texts.gettext("Sorry, /{command} is only for admins.").format(command=info.name)
            )
        if info.name != "help" and not await self.database_ready():  # all but /help need it
            log.info("%s: /%s answered: the database is unreachable", request.platform, info.name)
            return Answer(texts.gettext(DATABASE_AWAY))
        try:
            handler = self._built_in.get(info.name)
            if handler is not None:
                return Answer.of(await handler(request, texts))
            return Answer(await self._plugin_command(info, request, texts))
        except Exception:
            log.exception("%s: /%s failed", request.platform, info.name)
            failed = texts.gettext("Sorry, /{command} failed; the details are in the bot's log.")
            return Answer(failed.format(command=info.name))

    def help(self, *, is_admin: bool, texts: Texts = SOURCE_TEXTS) -> str:
        lines = [
            texts.gettext(
                "I remember what people tell me, and only in the chat where they said it."
            )
        ]
        for info in self.all():
            if open_to_all(info.name, SUBCOMMAND):  # `/facts history`: everyone's, own line
                lines.append(help_line(is_admin=is_admin, texts=texts))
            if info.admin_only and not is_admin:
                continue
            usage = f" {info.usage}" if info.usage else ""
            # A plugin's description is its own (not in the catalogs): shown as it is.
            lines.append(f"/{info.name}{usage} - {texts.gettext(info.description)}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ the shared rules
    async def database_ready(self) -> bool:
        """MongoDB answers and holds every message kept during an outage
        (bot/runtime/intake/outage.py)."""
        outage = self.services.outage
        return outage is None or await outage.ready(self.outage_wait)

    async def learned(self, room_id: str) -> bool:
        """Learn now from what the room said and was not yet learned from, and wait for it
        (at most `learn_wait` seconds). False when learning is still going on."""
        recent = await self.services.store.memories.recent(room_id, RECENT_FOR_LEARNING)
        said = [m for m in recent if m.user_id != self.services.agent_id]
        if said:
            # The idle flush's job, from the last thing a person said: one job per message,
            # so asking twice learns once.
            return await self.services.evaluations.flush_room(said[-1], timeout=self.learn_wait)
        return await self.services.evaluations.join(room_id, self.learn_wait)

    async def after_learning(
        self, room_id: str, answer: Callable[[], Awaitable[str]], texts: Texts = SOURCE_TEXTS
    ) -> str:
        done = await self.learned(room_id)
        text = await answer()
        return text if done else f"{text}\n{texts.gettext(STILL_LEARNING)}"

    async def forget_me(self, request: Request) -> str:
        """Forget the person who asked, in the world they asked in (they confirmed)."""
        texts = await self.texts(request)
        if not await self.database_ready():  # a button pressed during an outage
            return texts.gettext(DATABASE_AWAY)
        try:
            forgotten = await self.forgetting.person(request.account_id, request.world_id)
        except Exception:
            log.exception("%s: forgetting a person failed", request.platform)
            return texts.gettext(FORGET_FAILED)
        return describe_forgotten(forgotten, texts)

    async def forget_person_prompt(
        self,
        person_id: str,
        *,
        how: str = CONFIRM_BY_TEXT,
        name: str | None = None,
        texts: Texts = SOURCE_TEXTS,
    ) -> str:
        """What an admin is asked before forgetting someone, and `how` to confirm it (one of
        CONFIRM_BY_TEXT, CONFIRM_BY_BUTTON: in English, shown in `texts`' language)."""
        if name is None:
            account = (await self.services.store.accounts.get_many([person_id])).get(person_id)
            name = account.name if account is not None else texts.gettext("this person")
        prompt = texts.gettext(
            "This deletes everything I learned about {name} here, their messages and my "
            "replies to them. It cannot be undone: {how} if you are sure."
        )
        return prompt.format(name=name, how=texts.gettext(how))

    async def forget_person(self, person_id: str, request: Request) -> str:
        """Forget someone in the world of the request (an admin confirmed)."""
        texts = await self.texts(request)
        if not await self.database_ready():
            return texts.gettext(DATABASE_AWAY)
        try:
            forgotten = await self.forgetting.person(person_id, request.world_id)
        except Exception:
            log.exception("%s: forgetting a person failed", request.platform)
            return texts.gettext(FORGET_FAILED)
        return describe_forgotten(forgotten, texts, theirs=True)

    async def resolve(self, who: str, request: Request) -> str | None:
        """The account id for `@username` or a user id typed on the request's surface."""
        if request.resolve_person is not None:
            return await request.resolve_person(who)
        who = who.strip()
        if who.isdigit():
            return account_id(request.platform, int(who))
        name = who.removeprefix("@")
        account = await self.services.store.accounts.find_by_username(request.platform, name)
        return None if account is None else account.id

    # ------------------------------------------------------------------ built-in answers
    async def _help(self, request: Request, texts: Texts) -> str:
        return self.help(is_admin=request.is_admin, texts=texts)

    async def _me(self, request: Request, texts: Texts) -> str:
        return await self.after_learning(
            request.room_id, lambda: describe_me(self.services, request.scope, texts), texts
        )

    async def _fresh_start(self, request: Request, texts: Texts) -> str:
        """Mark the room: what was said before now is no longer shown to the reply model
        (bot/runtime/composing.py). Nothing is deleted; learning is untouched."""
        since = request.sent_at or utcnow()
        await self.services.store.rooms.set_mark(request.room_id, FRESH_START, since)
        return texts.gettext(FRESH_START_DONE)

    async def _forget_me_command(self, request: Request, texts: Texts) -> str:
        if request.args.strip().lower() in ("yes", "y", "confirm"):
            return await self.forget_me(request)
        sure = texts.gettext("Send /forgetme yes if you are sure.")
        return f"{texts.gettext(FORGET_ME_PROMPT)} {sure}"

    async def _export(self, request: Request, texts: Texts) -> Answer:
        # Learn from the latest messages first: the file then holds what was learned.
        await self.learned(request.room_id)
        data = await self.exporting.person(request.account_id, request.world_id)
        kept = texts.gettext("Everything I keep about you here ({summary}), as one JSON file.")
        return Answer(
            kept.format(summary=describe_export(data, texts)),
            Attachment(data.filename(), data.to_json()),
            private=True,
        )

    async def _facts(self, request: Request, texts: Texts) -> str:
        if asks_history(request.args):
            return await self.after_learning(
                request.room_id, history_of(self.services, request, texts), texts
            )
        who, search, page = parse_person_search_page(request.args)
        subject = request.subject_id or request.replied_to
        if who is not None:
            subject = await self.resolve(who, request)
            if subject is None:
                return texts.gettext("I don't know {who} here yet.").format(who=echo(who))
        return await self.after_learning(
            request.room_id,
            lambda: list_facts(
                self.services,
                request.scope,
                subject_id=subject,
                search=search,
                page=page,
                texts=texts,
            ),
            texts,
        )

    async def _forget(self, request: Request, texts: Texts) -> str:
        target = request.args.strip()
        subject = request.subject_id
        if subject is None and target.startswith("@"):
            subject = await self.resolve(target.split()[0], request)
            if subject is None:
                # Whether someone is known here is for admins to learn, as their facts are.
                return (
                    texts.gettext("I don't know {who} here yet.").format(
                        who=echo(target.split()[0])
                    )
                    if request.is_admin
                    else texts.gettext(ONLY_ADMINS_FORGET_PEOPLE)
                )
        if subject is not None:
            if not request.is_admin and subject != request.account_id:
                return texts.gettext(ONLY_ADMINS_FORGET_PEOPLE)
            if subject == request.account_id and not request.is_admin:
                return await self._forget_me_command(
                    replace(request, args=" ".join(target.split()[1:])), texts
                )
            # A whole person, as with /forgetme: nothing goes before the admin confirms.
            if target.split()[-1:] != ["yes"]:
                return await self.forget_person_prompt(subject, texts=texts)
            return await self.forget_person(subject, request)
        if not target:
            return texts.gettext(
                "Usage: /forget <fact id from /me or /facts> [yes], or admins: /forget @user"
            )
        words = target.split()
        return await forget_fact(
            self.services,
            request.scope,
            words[0],
            confirmed=words[-1:] == ["yes"] and len(words) > 1,
            owner=None if request.is_admin else request.account_id,
            texts=texts,
        )

    async def _stats(self, request: Request, texts: Texts) -> str:
        return await self.after_learning(
            request.room_id, lambda: stats(self.services, request.scope, texts), texts
        )

    async def _plugin_command(self, info: CommandInfo, request: Request, texts: Texts) -> str:
        command = self.services.plugins.find_command(info.name)
        assert command is not None  # listed by all() a moment ago

        async def answer() -> str:
            return await self.services.plugins.run_command(
                command,
                account_id=request.account_id,
                world_id=request.world_id,
                room_id=request.room_id,
                args=request.args,
                is_admin=request.is_admin,
                texts=texts,
            )

        if info.slow:
            return await self.after_learning(request.room_id, answer, texts)
        return await answer()


def admin_accounts(settings: PlatformSettings, platform: str) -> frozenset[str]:
    """The configured admins of a platform as account ids: one type on every platform."""
    return frozenset(account_id(platform, user) for user in settings.admin_ids_for(platform))


# ---------------------------------------------------------------------- answers
async def describe_me(services: CommandServices, scope: Scope, texts: Texts = SOURCE_TEXTS) -> str:
    facts, _ = await services.store.facts.page(
        scope.world_id, subject_id=scope.user_id, limit=PAGE_SIZE * 5
    )
    called = await told_name_line(services.store, scope.user_id, scope.world_id, texts)
    # What plugins keep for the person besides facts (e.g. a follow-up planned): their own
    # words, not in the catalogs.
    kept = "".join(
        f"\n{line}" for line in await services.plugins.about(scope.user_id, scope.world_id)
    )
    if not facts:
        # A plugin knows something (a plan, a follow-up): only facts are missing then.
        none = (
            texts.gettext("I haven't learned any facts about you here yet.")
            if kept
            else texts.gettext("I haven't learned anything about you here yet.")
        )
        return called + none + kept
    told = await told_lines(services.store.accounts, facts, texts)
    lines = "\n".join(f"• `{f.id[:8]}` {line}" for f, line in zip(facts, told, strict=True))
    known = texts.gettext("What I know about you here ({count}):").format(count=len(facts))
    wrong = texts.gettext(
        "Something wrong? /forget <id> forgets it, or just tell me what is right."
    )
    return f"{called}{known}\n{lines}{kept}\n{wrong}"


def describe_forgotten(forgotten: Forgotten, texts: Texts, *, theirs: bool = False) -> str:
    """What a /forgetme (or an admin's forgetting of someone, `theirs`) removed, as one
    sentence: "Done: I forgot 2 facts about you, 3 of your messages and ... here."."""
    if theirs:
        parts = [
            texts.ngettext("{count} fact about them", "{count} facts about them", forgotten.facts),
            texts.ngettext(
                "{count} of their messages", "{count} of their messages", forgotten.messages
            ),
        ]
    else:
        parts = [
            texts.ngettext("{count} fact about you", "{count} facts about you", forgotten.facts),
            texts.ngettext(
                "{count} of your messages", "{count} of your messages", forgotten.messages
            ),
        ]
    counts = [forgotten.facts, forgotten.messages, forgotten.replies]
    parts.append(
        texts.ngettext("{count} of my replies to them", "{count} of my replies to them", counts[2])
    )
    shown = [part.format(count=count) for part, count in zip(parts, counts, strict=True)]
    kept = [f"{name}: {count}" for name, count in forgotten.plugins.items() if count]
    if kept:
        shown.append(texts.gettext("what my plugins kept ({kept})").format(kept=", ".join(kept)))
    what = texts.gettext("{items} and {last}").format(items=", ".join(shown[:-1]), last=shown[-1])
    if theirs:
        return texts.gettext("Forgot {what} here.").format(what=what)
    # TRANSLATORS: begins with the translation of "Done: I forgot", which the console looks for.
    return texts.gettext("{done} {what} here.").format(done=texts.gettext(FORGOTTEN), what=what)


def describe_export(data: PersonalData, texts: Texts) -> str:
    """ "3 messages, 3 of my replies, 4 facts and what 2 plugins keep"."""
    kept = sum(1 for found in data.plugins.values() if found)
    parts = [
        texts.ngettext("{count} message", "{count} messages", len(data.messages)),
        texts.ngettext("{count} of my replies", "{count} of my replies", len(data.replies)),
        texts.ngettext("{count} fact", "{count} facts", len(data.facts)),
    ]
    counts = [len(data.messages), len(data.replies), len(data.facts)]
    shown = [part.format(count=count) for part, count in zip(parts, counts, strict=True)]
    plugins = texts.ngettext("what {count} plugin keeps", "what {count} plugins keep", kept)
    return texts.gettext("{items} and {last}").format(
        items=", ".join(shown), last=plugins.format(count=kept)
    )


def forgetting_of(services: CommandServices, *, wait_for_learning: float = 30.0) -> Forgetting:
    """The parts that forgetting a person touches (its data-folder files too)."""
    return Forgetting(
        store=services.store,
        knowledge=services.knowledge,
        messages=services.messages,
        plugins=services.plugins,
        evaluations=services.evaluations,
        agent_id=services.agent_id,
        forget_profiles=services.profiles.forget,
        wait_for_learning=wait_for_learning,
        **files_to_forget(services),
    )


def files_to_forget(services: CommandServices) -> dict[str, Any]:
    """Forgetting's keyword arguments for the data folder: the record of sent replies, the
    outage journal (its set-aside files) and the forget ledger (in the database and the
    folder, which the journal or the sent-reply record lives in)."""
    outage = services.outage
    journal = outage.journal if outage is not None else None
    folder = journal.path.parent if journal is not None else None
    if folder is None and services.sent_replies.path is not None:
        folder = services.sent_replies.path.parent
    return {
        "sent_replies": services.sent_replies,
        "journal": journal,
        "ledger": ForgetLedger(services.store.db, folder),
        "database_files": services.database_files,
    }


async def list_facts(
    services: CommandServices,
    scope: Scope,
    *,
    subject_id: str | None = None,
    search: str | None = None,
    page: int = 1,
    texts: Texts = SOURCE_TEXTS,
) -> str:
    page = max(page, 1)
    facts, total = await services.store.facts.page(
        scope.world_id,
        subject_id=subject_id,
        search=search or None,
        skip=(page - 1) * PAGE_SIZE,
        limit=PAGE_SIZE,
    )
    if total == 0:
        if not search:
            return texts.gettext("No facts learned here yet.")
        return texts.gettext("No facts match {search}.").format(search=echo(search))
    people = {f.subject_id for f in facts} | {f.said_by for f in facts if f.said_by}
    # Told apart where two of them read alike (bot/domain/names.py).
    names = distinct(await services.store.accounts.get_many(sorted(people)), scope.world_id)
    pages = (total + PAGE_SIZE - 1) // PAGE_SIZE
    lines = []
    for fact in facts:
        about = names.get(fact.subject_id)
        line = f"`{fact.id[:8]}` {fact.text}"
        if about:
            line += " — " + texts.gettext("about {name}").format(name=about.name)
        teller = names.get(fact.said_by) if fact.said_by else about
        source = evidence_of(fact, teller=teller.name if teller else None, texts=texts)
        lines.append(line + (f"\n    {source}" if source else ""))
    heading = texts.ngettext(
        "Facts (page {page}/{pages}, {total} in all):",
        "Facts (page {page}/{pages}, {total} in all):",
        total,
    )
    return heading.format(page=page, pages=pages, total=total) + "\n" + "\n".join(lines)


async def forget_fact(
    services: CommandServices,
    scope: Scope,
    fact_prefix: str,
    *,
    confirmed: bool = True,
    owner: str | None = None,
    texts: Texts = SOURCE_TEXTS,
) -> str:
    """Delete one fact by its id or the id prefix shown in listings, with the facts it
    replaced (its history: the value goes, not only its latest wording), from MongoDB and
    Chroma. `owner`: only a fact about this person may go (a member forgetting their own;
    None: an admin, any fact here). Unless `confirmed`, say what would go and how to confirm."""
    prefix = fact_prefix.strip().strip("`")
    if len(prefix) < 4:
        return texts.gettext(
            "Give at least the first 4 characters of the fact id shown in /me or /facts."
        )
    matches = await services.store.facts.with_id_prefix(scope.world_id, prefix)
    if owner is not None:
        matches = [f for f in matches if f.subject_id == owner]
    if not matches:
        none = (
            texts.gettext("No fact of yours with id {id} here.")
            if owner
            else texts.gettext("No fact with id {id} here.")
        )
        return none.format(id=echo(prefix))
    if len(matches) > 1:
        several = texts.ngettext(
            "{count} fact starts with {id}; give more of the id.",
            "{count} facts start with {id}; give more of the id.",
            len(matches),
        )
        return several.format(count=len(matches), id=echo(prefix))
    [fact] = matches
    if not confirmed:
        sure = texts.gettext(
            'This forgets "{fact}", and what it replaced, everywhere I keep it. '
            "Send /forget {id} yes if you are sure."
        )
        return sure.format(fact=fact.text, id=prefix)
    history = await services.knowledge.fact_history(fact.subject_id, scope.world_id)
    gone = [fact.id, *_replaced_by(fact.id, history)]
    for fact_id in gone:
        await services.knowledge.delete_fact(fact_id, world_id=scope.world_id)
    if services.database_files is not None:
        await services.database_files.scrub()  # its words out of the bundled server's files
    return texts.gettext("Forgot: {fact}").format(fact=fact.text)


def _replaced_by(fact_id: str, history: Sequence[Fact]) -> list[str]:
    """The ids of the facts `fact_id` replaced, and those they replaced, back to the first."""
    before = {f.superseded_by: f.id for f in history if f.superseded_by}
    found, current = [], fact_id
    while current in before and before[current] not in found:
        current = before[current]
        found.append(current)
    return found


async def stats(services: CommandServices, scope: Scope, texts: Texts = SOURCE_TEXTS) -> str:
    _, facts = await services.store.facts.page(scope.world_id, limit=1)
    messages = await services.store.memories.count_in_world(scope.world_id)
    rooms = await services.store.rooms.ids_in_world(scope.world_id)
    evaluations = describe_queue(await services.store.jobs.counts(room_ids=rooms), texts)
    # The plugins' lines are their own words, as they wrote them.
    kept = "".join(f"{line}\n" for line in await services.plugins.stats(scope.world_id))
    said = texts.gettext("Messages: {count} (kept {period})").format(
        count=messages, period=services.privacy.retention.describe(texts)
    )
    usage = await usage_in_world(services.ledger, services.store, scope.world_id)
    spent = describe_usage(usage, services.ledger, texts)
    capped = await describe_caps(services.caps, scope.world_id, texts)
    if capped is not None:
        spent += f"\n{capped}"
    rejected = describe_rejects(await services.store.rejects.counts(scope.world_id), texts)
    worlds = services.worlds
    chosen = world_choice.describe_world(
        await worlds.of(scope.world_id), worlds.default_models, texts
    )
    learned = texts.gettext("Facts: {count}").format(count=facts)
    evaluated = texts.gettext("Evaluations: {counts}").format(counts=evaluations)
    return f"{said}\n{learned}\n{rejected}\n{kept}{evaluated}\n{spent}\n{chosen}"
