"""Voice notes as text: the operator's speech-to-text model (MNEMO_TRANSCRIPTION_MODEL) on the
same OpenAI-compatible endpoint as the chat models, `/v1/audio/transcriptions`, through the
`openai` client (`audio.transcriptions.create`): OpenAI's whisper-1 or gpt-4o-*-transcribe,
or a local server that speaks the same route (faster-whisper-server, LocalAI, ...).

Only the transcript comes back into Mnemo; the audio is never stored. Each call is counted in
the ledger under the task `transcription` (calls, and tokens where the endpoint reports them:
gpt-4o-transcribe does, whisper-1 reports seconds, which are not tokens), for the metrics; not
in a world's `/stats` spend nor its daily caps, which count chat tokens at chat prices, while
speech is billed by the minute.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config.services import ModelSettings
from bot.llm.accounting import UsageLedger

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

TASK = "transcription"


class TranscriptionError(Exception):
    """The endpoint did not transcribe the audio; the message is safe to log."""


@dataclass(frozen=True)
class Audio:
    """A voice note's bytes, with the file name and type the platform gave them."""

    data: bytes
    filename: str
    media_type: str | None = None


class Transcriber:
    """Speech to text with the operator's model; `None` of it when none is configured."""

    def __init__(
        self,
        settings: ModelSettings,
        ledger: UsageLedger,
        *,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if settings.transcription_model is None:
            raise ValueError("no transcription model configured")
        self.model = settings.transcription_model
        self._ledger = ledger
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        self._secret = key or None
        self._owns_client = client is None
        if client is None:
            # Imported once a transcriber is made: the `openai` package takes about a second
            # of CPU to import, which a start without a model would pay for nothing.
            from bot.llm.openai_model import openai_client

            client = openai_client(settings)
        self._client = client

    @classmethod
    def of(cls, settings: ModelSettings, ledger: UsageLedger) -> Transcriber | None:
        """The transcriber the settings ask for, or None (no model, or no endpoint)."""
        if settings.transcription_model is None:
            return None
        if settings.offline:
            log.warning(
                "MNEMO_TRANSCRIPTION_MODEL is set but no endpoint is (OPENAI_API_KEY or "
                "OPENAI_BASE_URL): voice notes are kept unheard"
            )
            return None
        return cls(settings, ledger)

    async def transcribe(self, audio: Audio) -> str:
        """The words spoken in `audio` (stripped; "" when nothing was heard)."""
        import openai  # already loaded: the client is an openai one

        started = time.perf_counter()
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.model,
                file=(audio.filename, audio.data, audio.media_type or "application/octet-stream"),
            )
        except openai.APIError as error:
            self._ledger.record_failure(TASK)
            raise TranscriptionError(self._safe(f"{type(error).__name__}: {error}")) from None
        text = str(getattr(result, "text", "") or "").strip()
        usage = getattr(result, "usage", None)
        self._ledger.record(
            TASK,
            int(getattr(usage, "input_tokens", 0) or 0),
            int(getattr(usage, "output_tokens", 0) or 0),
            model=self.model,
            seconds=time.perf_counter() - started,
        )
        return text

    async def close(self) -> None:
        if self._owns_client:
            await self._client.close()

    def _safe(self, text: str) -> str:
        """An error's text without the API key, should the server echo it."""
        return text.replace(self._secret, "***") if self._secret else text
