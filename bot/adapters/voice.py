"""Voice notes heard: with a transcription model (MNEMO_TRANSCRIPTION_MODEL), a voice note's
audio is downloaded (only as far as MNEMO_MAX_VOICE_MB), transcribed (bot/llm/transcription.py)
and the message goes on as text: the transcript is its text, so it is kept, answered, learned
from and forgotten as anything typed. The audio itself is never stored; the attachment stays in
the message as a voice note, so a prompt still shows it was spoken ("[voice note]").

Without a model, or when the note is too large, the download or the transcription fails, or
nothing was heard, the message is kept as a voice note as it always was (a log line says why).
Each platform says what a voice note is (`VoiceFile`); this module does the rest, once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import aiohttp

from bot.adapters.images import DOWNLOAD_SECONDS, MEGABYTE, Chunks, TooLarge, read_capped
from bot.domain.records import Memory
from bot.domain.text import capped, valid_text
from bot.llm.transcription import Audio, Transcriber, TranscriptionError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VoiceFile:
    """A voice note as the platform describes it: a name for the model's file field, its
    type and declared size (None: unknown until downloaded), and how to read its bytes."""

    name: str
    media_type: str | None
    size: int | None
    chunks: Chunks


@dataclass(frozen=True)
class Hearing:
    """How voice notes are heard here: the transcriber and the size cap."""

    transcriber: Transcriber
    max_bytes: int

    @classmethod
    def of(cls, transcriber: Transcriber | None, max_voice_mb: float) -> Hearing | None:
        """None without a transcriber; `max_voice_mb`: MNEMO_MAX_VOICE_MB."""
        if transcriber is None:
            return None
        return cls(transcriber, int(max_voice_mb * MEGABYTE))

    async def heard(self, memory: Memory, voice: VoiceFile, *, where: str) -> Memory:
        """`memory` with what was said in `voice` as its text (after its caption, if it has
        one); `memory` itself when the note cannot be heard. `where` names the message in the
        log (an id, never its words)."""
        if voice.size is not None and voice.size > self.max_bytes:
            log.info("%s: voice note of %d bytes over the limit: kept unheard", where, voice.size)
            return memory
        try:
            data = await _download(voice.chunks, self.max_bytes)
            text = await self.transcriber.transcribe(Audio(data, voice.name, voice.media_type))
        except TooLarge:
            log.info("%s: voice note over the limit once downloaded: kept unheard", where)
            return memory
        except (TranscriptionError, aiohttp.ClientError, TimeoutError, OSError) as error:
            log.warning("%s: voice note not transcribed (%s): kept unheard", where, error)
            return memory
        if not text:
            log.info("%s: nothing heard in the voice note", where)
            return memory
        caption = memory.content.text.strip()
        # What the person said, cleaned and capped as any text at the door (bot/domain/text.py).
        spoken = capped(valid_text(f"{caption}\n{text}" if caption else text))
        content = memory.content.model_copy(update={"text": spoken})
        return memory.model_copy(update={"content": content})


async def _download(chunks: Chunks, limit: int) -> bytes:
    async with asyncio.timeout(DOWNLOAD_SECONDS):
        return await read_capped(chunks(), limit)
