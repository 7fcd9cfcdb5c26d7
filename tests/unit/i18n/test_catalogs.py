"""The shipped catalogs are whole and current: every text the bot shows is in the template,
every language translates all of it with the same placeholders, and the compiled `.mo`
(what gettext reads) says what its `.po` says. Failing here usually means: run
`make messages` (docs/languages.md)."""

from __future__ import annotations

import gettext
from pathlib import Path
from string import Formatter

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from bot.i18n import (
    DOMAIN,
    LOCALES,
    SOURCE_LANGUAGE,
    available_languages,
    match_language,
    texts_for,
)
from tests.paths import REPO

TRANSLATED = [code for code in available_languages() if code != SOURCE_LANGUAGE]


def _read(path: Path) -> Catalog:
    with path.open("rb") as source:
        return read_po(source)


def _po(language: str) -> Path:
    return LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def _placeholders(text: str) -> set[str]:
    return {field for _, field, _, _ in Formatter().parse(text) if field is not None}


def _forms(message_id: str | tuple[str, ...]) -> tuple[str, ...]:
    return message_id if isinstance(message_id, tuple) else (message_id,)


def test_spanish_ships_beside_the_source_language() -> None:
    assert available_languages()[:1] == ("en",)  # the source language first
    assert "es" in available_languages()


def test_the_template_holds_every_text_marked_in_the_code() -> None:
    """What `pybabel extract` finds in bot/ now is what the template and each catalog hold:
    a text added or changed without `make messages` fails here."""
    found = {message_id for _, _, message_id, _, _ in extract_from_dir(REPO / "bot") if message_id}
    found = {m if isinstance(m, str) else m[0] for m in found}
    template = {
        m.id if isinstance(m.id, str) else m.id[0] for m in _read(LOCALES / "mnemo.pot") if m.id
    }
    assert found == template
    for language in TRANSLATED:
        catalog = {m.id if isinstance(m.id, str) else m.id[0] for m in _read(_po(language)) if m.id}
        assert catalog == template, language


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_text_is_translated_with_the_same_placeholders(language: str) -> None:
    catalog = _read(_po(language))
    untranslated, changed = [], []
    for message in catalog:
        if not message.id:
            continue
        wanted = set().union(*(_placeholders(form) for form in _forms(message.id)))
        strings = _forms(message.string)
        if (
            message.fuzzy
            or len(strings) != (catalog.num_plurals if message.pluralizable else 1)
            or not all(strings)
        ):
            untranslated.append(message.id)
            continue
        for string in strings:
            if _placeholders(string) != wanted:
                changed.append((message.id, string))
    assert not untranslated, untranslated
    assert not changed, changed


@pytest.mark.parametrize("language", TRANSLATED)
def test_the_compiled_catalog_is_the_source_compiled(language: str) -> None:
    """The `.mo` beside the `.po` holds exactly its translations (`pybabel compile` ran)."""
    catalog = _read(_po(language))
    with (LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.mo").open("rb") as compiled:
        loaded = gettext.GNUTranslations(compiled)
    # The catalog's own plural rule (C syntax), as gettext itself reads it.
    plural = gettext.c2py(catalog.plural_expr)
    for message in catalog:
        if not message.id:
            continue
        if message.pluralizable:
            for count in (0, 1, 2, 5, 1_000_000):
                shown = loaded.ngettext(message.id[0], message.id[1], count)
                assert shown == message.string[plural(count)], (message.id, count)
        else:
            assert loaded.gettext(message.id) == message.string, message.id


def test_a_platform_locale_finds_its_language_and_an_unknown_one_none() -> None:
    assert match_language("es-ES") == "es"  # Discord's spelling
    assert match_language("es") == "es"  # Telegram's
    assert match_language("pt-BR") is None
    assert match_language(None) is None
    assert texts_for("es").gettext("Got it.") == "Entendido."
