"""The privacy policy a running Mnemo applies: whose messages it may keep (consent), how long
it keeps them (retention) and what `/privacy` says. Built once at start-up from the settings
and handed to the runtime (the intake check) and the command layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cachetools import FIFOCache

from bot.domain.records import Memory
from bot.i18n import N_
from bot.privacy.consent import ConsentStore
from bot.privacy.retention import Retention

# Unkept message ids remembered, so a platform's redelivery is not answered twice: no job
# records them (a kept message's job does), and a day of redeliveries is far fewer.
RECENT_UNKEPT = 10_000

# The one line an opted-out person gets, on their first message after opting out.
# In English: sent in the person's language (bot/i18n) by the intake.
OPTED_OUT_NOTICE = N_(
    "(You opted out here, so I'm not keeping or learning from anything you say. "
    "Send /optin to change that.)"
)


@dataclass(frozen=True)
class Admission:
    """Whether a message may be stored and learned from, and what to tell its author."""

    learn: bool
    notice: str | None = None
    # Not kept, and seen before in this process: a redelivery, not to be answered again.
    repeat: bool = False


LEARN = Admission(learn=True)


@dataclass(frozen=True)
class PrivacyPolicy:
    consent: ConsentStore
    retention: Retention = field(default_factory=Retention)
    # The operator's /privacy text (MNEMO_PRIVACY_TEXT or the file's), shown as it is.
    operator_text: str | None = None
    # The messages refused most recently (the oldest go first): a redelivery is told apart.
    _unkept: FIFOCache[str, None] = field(
        default_factory=lambda: FIFOCache(maxsize=RECENT_UNKEPT), init=False, repr=False
    )

    async def admit(
        self, memory: Memory, *, consent: list[dict[str, Any]] | None = None
    ) -> Admission:
        """Checked for every message before anything of it is stored. `consent`: the
        documents of `ConsentStore.ids` for it, when the caller read them already."""
        where = {"user_id": memory.user_id, "room_id": memory.room_id, "world_id": memory.world_id}
        if consent is None:
            refusal = await self.consent.check(**where)
        else:
            refusal = self.consent.check_found(consent, **where)
        if refusal is None:
            return LEARN
        if memory.id in self._unkept:
            return Admission(learn=False, repeat=True)
        self._unkept[memory.id] = None
        notice = None
        if refusal.notify and await self.consent.claim_notice(
            user_id=memory.user_id, world_id=memory.world_id
        ):
            notice = OPTED_OUT_NOTICE
        return Admission(learn=False, notice=notice)
