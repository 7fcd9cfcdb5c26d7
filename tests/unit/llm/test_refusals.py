"""A refusal of an ordinary chat message, recognised in the languages of the development sets
(bot/llm/reply_checks.refuses): never shown, never stored as the bot's line."""

from __future__ import annotations

import pytest

from bot.llm.reply_checks import refuses

REFUSALS = [
    "I'm sorry, I can't help with that.",  # issue 31's live run, 10 times in 19
    "I'm sorry, but I can't assist with that.",  # the live run of the new prompt
    "Sorry, as an AI language model, I cannot help with that.",
    "Desculpe pela confusão, mas não posso ajudar com isso.",  # live, to a Brazilian's goal
    "Lo siento, pero no puedo ayudarte con eso.",
    "No puedo ayudarte con eso.",
    "Je suis désolé, mais je ne peux pas vous aider avec ça.",
    "Es tut mir leid, aber ich kann dir dabei nicht helfen.",
    "Mi dispiace, non posso aiutarti con questo.",
]

REPLIES = [
    "I can't help noticing you sound happier this week!",
    "Sorry to hear that! Was the shift long?",
    "Lo siento mucho por tu perro. ¿Puedo ayudarte con algo?",
    "Ich kann dir gern helfen! Was brauchst du?",
    "Leider regnet es, aber ich kann dir helfen, eine Jacke zu finden.",
    "Je ne peux pas attendre de voir ta nouvelle maison !",
    "Que pena! Não posso imaginar como foi difícil.",
    "Sinto muito pelo seu cachorro, posso ajudar em algo?",
]


@pytest.mark.parametrize("reply", REFUSALS)
def test_a_refusal_is_recognised(reply: str) -> None:
    assert refuses(reply)


@pytest.mark.parametrize("reply", REPLIES)
def test_a_reply_is_not_a_refusal(reply: str) -> None:
    assert not refuses(reply)
