"""The bot's own words in the person's language (issue 31, docs/languages.md): through the
real python-telegram-bot and discord.py paths against the local fakes, and the console. A
Spanish-speaking person's app (Telegram's `language_code`, Discord's interaction `locale`)
gets the answers, buttons and fallback lines in Spanish; a world's admins choose one for
everyone with `/language`; nobody else can; what the model writes is not translated."""

from __future__ import annotations

import io
from pathlib import Path

import discord

from bot.adapters.console import ConsoleChat
from bot.commands.command_set import FRESH_START_DONE
from bot.domain.records import world_id
from bot.i18n import texts_for
from bot.plugin.offline_model import acknowledgement
from bot.runtime.replying import FALLBACK_REPLY, RATE_LIMITED_REPLY
from bot.testing.harness import open_test_app
from bot.testing.scripted import ScriptedModel
from plugins.goals import plugin as GOALS
from tests.fakes.telegram_server import FakeTelegramServer
from tests.helpers.discord_bot import mnemo_on_discord
from tests.helpers.telegram_bot import OpenBot, open_bot, server  # noqa: F401 (fixtures)

SPANISH = texts_for("es")
# A reply that shows an action's name (the goals plugin's), twice: the fallback goes instead.
ACTION_ECHO = '{"text": "Create_goal: I want to improve my communication skills", "action": "NONE"}'


async def test_a_spanish_telegram_user_gets_help_me_and_the_forgetme_buttons_in_spanish(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    lucia = server.user("Lucía", language_code="es")
    sam = server.user("Sam", language_code="en")
    async with open_bot() as bot:
        helped = await bot.said(server.private_chat(lucia), lucia, "/help")
        english = await bot.said(server.private_chat(sam), sam, "/help")
        me = await bot.said(server.private_chat(lucia), lucia, "/me")
        dm = server.private_chat(lucia)
        await bot.said(dm, lucia, "Vivo en Málaga")
        prompt = await bot.said(dm, lucia, "/forgetme")
        buttons = [b["text"] for b in prompt.reply_markup["inline_keyboard"][0]]  # type: ignore[index]
        yes = prompt.reply_markup["inline_keyboard"][0][0]["callback_data"]  # type: ignore[index]
        server.push_callback(lucia, prompt, yes)
        [edit] = await server.wait_for_calls("editMessageText", 1)
        [pressed] = server.calls_to("answerCallbackQuery")
    assert helped.text.startswith("Recuerdo lo que me cuenta la gente")
    assert "/me - Lo que sé de ti aquí" in helped.text
    assert "/forgetme [yes] - Olvida todo lo tuyo aquí" in helped.text
    assert english.text.startswith("I remember what people tell me")
    assert me.text == "Todavía no he aprendido nada sobre ti aquí."
    assert prompt.text.startswith("Esto borra todo lo que aprendí sobre ti aquí")
    assert prompt.text.endswith("No se puede deshacer. ¿Seguro?")
    assert buttons == ["Sí, olvídame", "No"]
    assert pressed.params["text"] == "Olvidando…"
    assert edit.params["text"].startswith("Hecho: he olvidado ")
    assert "de tus mensajes" in edit.params["text"] and edit.params["text"].endswith(" aquí.")


async def test_telegram_menus_carry_spanish_descriptions_for_spanish_apps(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    async with open_bot():
        menus = {
            c.params.get("language_code"): {
                x["command"]: x["description"] for x in c.params["commands"]
            }
            for c in server.calls_to("setMyCommands")
            if c.params.get("scope", {}).get("type", "default") == "default"
        }
    assert menus[None]["me"] == "What I know about you here"
    assert menus["es"]["me"] == "Lo que sé de ti aquí"
    assert menus["es"]["reset"].startswith("Empieza de nuevo aquí")
    assert set(menus["es"]) == set(menus[None])


async def test_the_fallback_and_the_rate_limit_line_come_in_the_persons_language(
    open_bot: OpenBot,  # noqa: F811
    server: FakeTelegramServer,  # noqa: F811
) -> None:
    lucia = server.user("Lucía", language_code="es")
    model = ScriptedModel(answers={"reply": [ACTION_ECHO] * 4})
    async with open_bot(plugins=[GOALS], model=model, rate_limit=2) as bot:
        dm = server.private_chat(lucia)
        statement = await bot.said(dm, lucia, "I sold my car.")
        question = await bot.said(dm, lucia, "What should I buy now?")
        limited = await bot.said(dm, lucia, "Hello again")
    # What the model would have said is not shown; the bot's own line is, in Spanish.
    assert statement.text == SPANISH.gettext(acknowledgement("I sold my car."))
    assert statement.text != acknowledgement("I sold my car.")
    assert (
        question.text
        == SPANISH.gettext(FALLBACK_REPLY)
        == ("Lo siento, he perdido el hilo. ¿Puedes repetirlo?")
    )
    assert limited.text == SPANISH.gettext(RATE_LIMITED_REPLY)
    assert limited.text.startswith("Me están llegando muchos mensajes tuyos")


async def test_an_admin_chooses_spanish_for_a_discord_server_and_a_member_cannot(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Club de lectura")
        ana, sam = fake.person("Ana"), fake.person("Sam")
        before = await bot.run("me", fake.interaction(sam, guild=guild))
        refused = await bot.run("language", fake.interaction(sam, guild=guild), args="es")
        still = await bot.run("me", fake.interaction(sam, guild=guild))
        shown = await bot.run("language", fake.interaction(ana, guild=guild, manage_server=True))
        unknown = await bot.run(
            "language", fake.interaction(ana, guild=guild, manage_server=True), args="xx"
        )
        chosen = await bot.run(
            "language", fake.interaction(ana, guild=guild, manage_server=True), args="es"
        )
        after = await bot.run("me", fake.interaction(sam, guild=guild))
        reset = await bot.run("reset", fake.interaction(sam, guild=guild))
        stored = await bot.app.store.worlds.get(world_id("discord", guild.id))
        # Elsewhere (Sam's DM with the bot) nothing changed.
        elsewhere = await bot.run("me", fake.interaction(sam))
    assert before == still == "I haven't learned anything about you here yet."
    assert refused.startswith("Only people with the Manage Server permission")
    assert "Here I speak each person's language when I have it, else en (English)." in shown
    assert "Available: en (English), es (español)." in shown
    assert unknown.startswith("I have no language “xx”; nothing changed.")
    assert chosen == "Ahora aquí hablo es (español)."
    assert after == "Todavía no he aprendido nada sobre ti aquí."
    assert reset == SPANISH.gettext(FRESH_START_DONE) != FRESH_START_DONE
    assert stored is not None and stored.language == "es"
    assert elsewhere == "I haven't learned anything about you here yet."


async def test_a_discord_client_in_spanish_gets_spanish_answers_and_buttons(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    async with mnemo_on_discord(tmp_path, model_dir, mongo_uri) as bot:
        fake = bot.discord
        guild = fake.guild("Club")
        ana = fake.person("Ana")
        spanish = discord.Locale.spain_spanish
        helped = await bot.run("help", fake.interaction(ana, guild=guild, locale=spanish))
        asking = fake.interaction(ana, guild=guild, locale=spanish)
        await bot.command("forgetme")(asking)
        labels = [item.label for item in asking.view.children]  # type: ignore[union-attr]
        refused = await bot.run("stats", fake.interaction(ana, guild=guild, locale=spanish))
        admin = fake.person("Marta")
        stats = await bot.run(
            "stats", fake.interaction(admin, guild=guild, locale=spanish, manage_server=True)
        )
        character = await bot.run(
            "character", fake.interaction(admin, guild=guild, locale=spanish, manage_server=True)
        )
    assert helped.startswith("Recuerdo lo que me cuenta la gente")
    # An admin's reports too, around the numbers and the operator's names.
    assert stats.startswith("Mensajes: 0 (se guardan para siempre)\nDatos: 0\n")
    assert "Evaluaciones: 0 hechas, 0 pendientes" in stats
    assert "Personaje: Mnemo (mnemo). Modelos aquí:" in stats
    assert character.startswith("Aquí soy Mnemo (mnemo).\nInstalados: ")
    assert asking.text.startswith("Esto borra todo lo que aprendí sobre ti aquí")
    assert labels == ["Olvídame", "Cancelar"]
    assert refused.startswith("Solo las personas con el permiso Gestionar servidor")


async def test_the_console_speaks_the_operators_language(
    tmp_path: Path, model_dir: Path, mongo_uri: str
) -> None:
    """The console has no locale: MNEMO_LANGUAGE decides, and /language changes it."""
    async with open_test_app(
        tmp_path, model_dir=model_dir, mongodb_uri=mongo_uri, language="es"
    ) as app:
        out = io.StringIO()
        said = "/help\n/me\n/language en\n/me\n"
        await ConsoleChat(user_name="sam", stdin=io.StringIO(said), stdout=out).run(
            app.adapter_services
        )
    shown = out.getvalue()
    assert "Recuerdo lo que me cuenta la gente" in shown
    assert "/quit - salir (Ctrl-D también sirve)" in shown
    spanish, english = shown.split("Here I speak en (English) now.")
    assert "Todavía no he aprendido nada sobre ti aquí." in spanish
    assert "I haven't learned anything about you here yet." in english
