"""What a plugin author tests with, shipped with the package so plugins are tested as they run:
the harness (`open_test_app`, `TestChat`), the scripted model, the fake OpenAI server, and a
pytest plugin (`pytest_plugin.py`, registered by the `pytest11` entry point) that gives every
test the `model_dir` and `mongo_uri` fixtures.

The fakes of Discord and Telegram are Mnemo's own test tools and live in `tests/fakes/`.
"""
