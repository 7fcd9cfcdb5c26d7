"""Local fakes of the Discord and Telegram services, for Mnemo's own adapter tests.

Kept out of the installed package: a plugin author tests against `bot.testing` (the harness,
the scripted model, the fake OpenAI server); only the platform adapters need these.
"""
