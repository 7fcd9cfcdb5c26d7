"""Language models: the OpenAI-compatible client, the offline model, parsing and accounting."""

from bot.llm.accounting import UsageLedger
from bot.llm.base import LanguageModel, ModelClass, Task

__all__ = ["LanguageModel", "ModelClass", "Task", "UsageLedger"]
