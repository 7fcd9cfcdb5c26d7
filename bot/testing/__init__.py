"""What a plugin author tests with, shipped with the package so plugins are tested as they run:
the harness (`open_test_app`, `TestChat`), the scripted model and the fake OpenAI server.

The fakes of Discord and Telegram are Mnemo's own test tools and live in `tests/fakes/`.
"""
