"""Language models: the OpenAI-compatible client, the offline model, parsing and accounting."""

from bot.llm.base import LanguageModel, ModelClass, Task
from bot.llm.usage import UsageLedger

__all__ = ["LanguageModel", "ModelClass", "Task", "UsageLedger"]
