"""Finding and loading the message catalogs, and matching a platform's locale to one.

A translated text is written with its placeholders named (`{command}`), filled by
`str.format` after the translation is looked up: a translator may move them, and
tests/unit/i18n checks every translation keeps the same ones.
"""

from __future__ import annotations

import gettext
from datetime import date
from functools import cache
from pathlib import Path

from babel import Locale, UnknownLocaleError, negotiate_locale
from babel.dates import format_date

# The catalogs' name: locales/<code>/LC_MESSAGES/mnemo.mo.
DOMAIN = "mnemo"
LOCALES = Path(__file__).parent / "locales"
# The language the texts are written in (the msgids): no catalog of its own.
SOURCE_LANGUAGE = "en"

# What a text is looked up in: `texts.gettext(...)`, `texts.ngettext(...)`. The source
# language's is the null catalog, which answers every text with itself (and English plurals).
Texts = gettext.NullTranslations


# The source language's catalog: the default of every function that shows a text.
SOURCE_TEXTS: Texts = gettext.NullTranslations()


class UnknownLanguage(ValueError):
    """No catalog for this language code."""


def N_(message: str) -> str:
    """Mark a text for extraction where it is defined (a constant, a command's description);
    it is translated where it is shown, once the person's language is known."""
    return message


@cache
def available_languages() -> tuple[str, ...]:
    """The source language, then every language with a compiled catalog, by code."""
    found = sorted(path.parent.parent.name for path in LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.mo"))
    return (SOURCE_LANGUAGE, *(code for code in found if code != SOURCE_LANGUAGE))


@cache
def texts_for(language: str) -> Texts:
    """The catalog of `language` (a code from `available_languages`); read once."""
    if language == SOURCE_LANGUAGE:
        return SOURCE_TEXTS
    if language not in available_languages():
        raise UnknownLanguage(language)
    with (LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.mo").open("rb") as compiled:
        return gettext.GNUTranslations(compiled)


def match_language(tag: str | None) -> str | None:
    """The available language for a locale as a platform or a person writes it ("es",
    "es-ES", "pt_BR", "ES"): the same code, else its language alone; None when none fits."""
    if not tag or not tag.strip():
        return None
    wanted = tag.strip().replace("-", "_")
    by_folded = {code.casefold(): code for code in available_languages()}
    # negotiate_locale compares without case and falls back from "es_ES" to "es"; it answers
    # in the spelling asked for, so the catalog's own code is looked up again.
    found = negotiate_locale([wanted], list(by_folded), sep="_")
    return None if found is None else by_folded[found.casefold()]


def language_name(language: str) -> str:
    """The language's own name for itself ("español"), or the code when Babel has none."""
    try:
        return Locale.parse(language).get_display_name(language) or language
    except (UnknownLocaleError, ValueError):
        return language


def language_of(texts: Texts) -> str:
    """The language code of a catalog (its header's `Language`; the source's: English)."""
    return texts.info().get("language") or SOURCE_LANGUAGE


def day_and_month(when: date, texts: Texts) -> str:
    """A day as a catalog's language writes it short: "1 Dec", "1 dic"."""
    return format_date(when, "d MMM", locale=language_of(texts))
