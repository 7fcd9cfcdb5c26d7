"""A world's own character and models: a command request from a chat, a scripted reply, and
settings pointing the model at a local OpenAI-compatible endpoint."""

from __future__ import annotations

import dataclasses
import json

from pydantic import SecretStr

from bot.commands.command_set import Request
from bot.config.settings import ModelSettings, Settings
from bot.testing.harness import TestChat

HELLO = json.dumps({"text": "Hello there", "action": "NONE"})


def ask(
    chat: TestChat, args: str = "", *, is_admin: bool = True, account_id: str | None = None
) -> Request:
    return Request(
        platform=chat.platform,
        account_id=account_id or chat.account.id,
        world_id=chat.room.world_id,
        room_id=chat.room.id,
        is_admin=is_admin,
        args=args,
    )


# The model names the operator lets admins choose in these tests (MNEMO_MODEL_CHOICES).
CHOICES = ("gpt-x", "tiny-x", "no-such-model")


def allowing(settings: Settings, *names: str) -> Settings:
    """`settings` with MNEMO_MODEL_CHOICES set to `names` (by default, `CHOICES`)."""
    model = settings.model.model_copy(update={"model_choices": list(names or CHOICES)})
    return dataclasses.replace(settings, model=model)


def with_endpoint(settings: Settings, base_url: str, *choices: str) -> Settings:
    """The model at `base_url`, its classes fake-small and fake-large; admins may choose
    `choices` (by default, `CHOICES`)."""
    model = ModelSettings.model_construct(
        openai_api_key=SecretStr("test-key"),
        openai_base_url=base_url,
        small_model="fake-small",
        large_model="fake-large",
        model_choices=list(choices or CHOICES),
        timeout_seconds=5.0,
        max_retries=0,
    )
    return dataclasses.replace(settings, model=model)
