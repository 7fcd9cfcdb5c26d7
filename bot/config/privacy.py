"""The operator's privacy settings: how long messages are kept, and the `/privacy` text.

    MNEMO_RETENTION_DAYS=90          messages (and their vectors) older than this are deleted
    MNEMO_PRIVACY_TEXT="..."         the /privacy answer, instead of the built-in one
    MNEMO_PRIVACY_FILE=privacy.md    the same, read from a file (read once, at start-up)

A file that is missing or unreadable stops start-up with one line naming the setting: an
operator who points at a policy expects it to be shown, never the built-in text instead.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator

from bot.config.base import SettingsGroup, settings_config

# Longer than any policy a chat command should show; a bigger file is a wrong file.
MAX_PRIVACY_CHARS = 20_000


class PrivacySettings(SettingsGroup):
    model_config = settings_config("MNEMO_")

    # 0: messages are kept until forgotten. Facts are never deleted by age.
    retention_days: int = Field(0, ge=0, le=36_500)
    privacy_text: str | None = Field(None, max_length=MAX_PRIVACY_CHARS)
    privacy_file: Path | None = None

    @field_validator("privacy_text")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        return value

    @field_validator("privacy_file")
    @classmethod
    def _readable(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        if info.data.get("privacy_text") is not None:
            # Two sources would leave the operator guessing which one people see.
            raise ValueError("set MNEMO_PRIVACY_TEXT or MNEMO_PRIVACY_FILE, not both")
        path = value.expanduser().absolute()
        if not path.is_file():
            raise ValueError(f"no such file: {path}")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read {path} ({type(error).__name__})") from None
        if not text.strip():
            raise ValueError(f"{path} is empty")
        if len(text) > MAX_PRIVACY_CHARS:
            raise ValueError(f"{path} is longer than {MAX_PRIVACY_CHARS} characters")
        return path

    def operator_text(self) -> str | None:
        """The operator's /privacy text, if they gave one."""
        if self.privacy_file is not None:
            return self.privacy_file.read_text(encoding="utf-8").strip()
        return self.privacy_text.strip() if self.privacy_text else None


def default_privacy() -> PrivacySettings:
    # Settings built in code (tests, benches) get the defaults without reading the environment.
    return PrivacySettings.model_construct(
        **{
            name: info.get_default(call_default_factory=True)
            for name, info in PrivacySettings.model_fields.items()
        }
    )
