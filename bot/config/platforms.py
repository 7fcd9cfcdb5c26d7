"""Settings of the chat platforms: tokens, admins, the Telegram webhook, Discord shards, the
reply limit."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from bot.config.base import SettingsGroup, env, http_url, settings_config, split_csv

# Platforms an admin id may name; kept here (not imported from bot.domain.records) so settings load
# without the domain package.
_ADMIN_PLATFORMS = ("discord", "telegram", "console", "test")
# The secret_token alphabet Telegram's setWebhook accepts.
_WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")


class PlatformSettings(SettingsGroup):
    model_config = settings_config()

    # elizaOS's names are accepted too, so an elizaOS `.env` works as it is.
    discord_token: SecretStr | None = Field(
        None, validation_alias=env("DISCORD_TOKEN", "DISCORD_API_TOKEN")
    )
    telegram_token: SecretStr | None = Field(
        None, validation_alias=env("TELEGRAM_TOKEN", "TELEGRAM_BOT_TOKEN")
    )
    # Platform user ids ("discord:123", "telegram:456", or a bare id) allowed the admin commands.
    admin_ids: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=env("MNEMO_ADMIN_IDS")
    )
    # Set: Telegram pushes updates to this public URL (behind a load balancer) instead of
    # being polled; several processes can then share one bot.
    telegram_webhook_url: str | None = Field(
        None, validation_alias=env("MNEMO_TELEGRAM_WEBHOOK_URL")
    )
    # The Bot API server: Telegram's by default, or a self-hosted `telegram-bot-api` server
    # (its URL up to the `/bot` part, e.g. http://127.0.0.1:8081/bot).
    telegram_api_url: str | None = Field(None, validation_alias=env("MNEMO_TELEGRAM_API_URL"))
    telegram_webhook_port: int = Field(
        8443, ge=1, le=65535, validation_alias=env("MNEMO_TELEGRAM_WEBHOOK_PORT")
    )
    # Where the webhook server listens: every interface behind a load balancer, loopback
    # behind a reverse proxy on the same host.
    telegram_webhook_listen: str = Field(
        "0.0.0.0", validation_alias=env("MNEMO_TELEGRAM_WEBHOOK_LISTEN")
    )
    # What Telegram sends back in a header with every update, so forged ones are refused
    # (1-256 of A-Z, a-z, 0-9, _ and -). Unset: derived from the bot token, the same in every
    # process; set it to rotate it or to share it with a proxy that checks it.
    telegram_webhook_secret: SecretStr | None = Field(
        None, validation_alias=env("MNEMO_TELEGRAM_WEBHOOK_SECRET")
    )
    # Administrators of a Telegram group may use the admin commands in that group.
    telegram_group_admins: bool = Field(False, validation_alias=env("MNEMO_TELEGRAM_GROUP_ADMINS"))
    # The personal commands are always global (Discord shows no server's commands in a DM);
    # this registers the admin commands globally too (one call for all servers, still offered
    # in servers only) instead of in each server, where a change shows at once.
    discord_global_sync: bool = Field(False, validation_alias=env("MNEMO_DISCORD_GLOBAL_SYNC"))
    # Discord shards: how many in all (`auto`: as many as Discord recommends, all run here),
    # and which of them this process runs (default: all). One process per shard id range
    # splits the gateway traffic across processes; each guild belongs to one shard.
    discord_shards: int | Literal["auto"] | None = Field(
        None, validation_alias=env("MNEMO_DISCORD_SHARDS")
    )
    discord_shard_ids: Annotated[list[int], NoDecode] = Field(
        default_factory=list, validation_alias=env("MNEMO_DISCORD_SHARD_IDS")
    )
    # Replies per user per minute; 0 turns the limit off.
    rate_limit_per_minute: int = Field(
        6, ge=0, le=10_000, validation_alias=env("MNEMO_RATE_LIMIT_PER_MINUTE")
    )

    # Images people send (issue 21). On: a photo or image attachment of a message Mnemo
    # answers is downloaded and sent to the LARGE model as an image part; off: the model gets
    # the caption and the file name only. The operator says whether the model sees images:
    # nothing is guessed from its name. At most `max_images` per message, each at most
    # `max_image_mb`; the rest are left out (a log line; the attachment's title stays).
    model_sees_images: bool = Field(False, validation_alias=env("MNEMO_MODEL_SEES_IMAGES"))
    max_images: int = Field(4, ge=0, le=16, validation_alias=env("MNEMO_MAX_IMAGES"))
    max_image_mb: float = Field(5.0, gt=0, le=20, validation_alias=env("MNEMO_MAX_IMAGE_MB"))
    # With MNEMO_TRANSCRIPTION_MODEL: a voice note larger than this is not downloaded nor
    # transcribed (kept as a voice note). OpenAI takes files up to 25 MB.
    max_voice_mb: float = Field(10.0, gt=0, le=25, validation_alias=env("MNEMO_MAX_VOICE_MB"))

    _split = field_validator("admin_ids", "discord_shard_ids", mode="before")(split_csv)

    @field_validator("telegram_webhook_secret")
    @classmethod
    def _secret_alphabet(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _WEBHOOK_SECRET.fullmatch(value.get_secret_value()):
            raise ValueError("use 1 to 256 of the characters A-Z, a-z, 0-9, _ and -")
        return value

    @field_validator("discord_shards", mode="before")
    @classmethod
    def _shards(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().lower()
            if value == "auto":
                return value
            if not value.isdigit():
                raise ValueError("expected a number of shards (1 or more) or auto")
            value = int(value)
        if isinstance(value, int) and value < 1:
            raise ValueError("expected a number of shards (1 or more) or auto")
        return value

    @field_validator("discord_shard_ids")
    @classmethod
    def _shard_ids(cls, ids: list[int], info: ValidationInfo) -> list[int]:
        if not ids:
            return ids
        total = info.data.get("discord_shards")
        if not isinstance(total, int):
            raise ValueError("needs MNEMO_DISCORD_SHARDS set to the number of shards in all")
        wrong = [i for i in ids if not 0 <= i < total]
        if wrong:
            raise ValueError(f"shard ids run from 0 to {total - 1}; got {wrong[0]}")
        return sorted(set(ids))

    _url = field_validator("telegram_webhook_url", "telegram_api_url")(http_url)

    @field_validator("admin_ids")
    @classmethod
    def _check_admin_ids(cls, ids: list[str]) -> list[str]:
        # A typo in the platform would silently lock the admin out, so it is an error.
        normalized: list[str] = []
        for raw in ids:
            platform, sep, user = raw.strip().partition(":")
            if sep:
                if platform.lower() not in _ADMIN_PLATFORMS or not user.strip():
                    raise ValueError(
                        f"{raw.strip()!r} is not an id like 123, discord:123 or telegram:456"
                    )
                value = f"{platform.lower()}:{user.strip()}"
            else:
                value = platform
            if value not in normalized:
                normalized.append(value)
        return normalized

    def admin_ids_for(self, platform: str) -> frozenset[str]:
        """The admin user ids that apply on one platform: `platform:123` and bare `123`."""
        ids = set()
        for entry in self.admin_ids:
            prefix, sep, user = entry.partition(":")
            if not sep:
                ids.add(prefix)
            elif prefix == platform:
                ids.add(user)
        return frozenset(ids)
