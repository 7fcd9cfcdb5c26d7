"""For a plugin's offline answers (what the offline model says for the plugin's tasks when no
model is configured): the helpers the built-in plugins' answers are written with.

    from bot.offline import normalise, reply_json, sentences
"""

from bot.memory.text import find_words, is_question, sentences
from bot.plugin.offline_model import cap, greets, normalise, reply_json, small_talk

__all__ = [
    "cap",
    "find_words",
    "greets",
    "is_question",
    "normalise",
    "reply_json",
    "sentences",
    "small_talk",
]
