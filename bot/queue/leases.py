"""The leases one process holds in its deployment (bot/storage/leases.py): its own, and those
of the rooms whose evaluations it drains (bot/queue/worker.py).

A room's lease is taken before draining it and released after, so that another process that
wrote a job meanwhile can drain it. While this process is alone in the deployment (no other
process lease is live, checked at start-up and at every renewal), nobody else can want a
room: its lease is kept after draining and renewed with the others, so an evaluation costs no
lease round trip at all. Once another process shows up, the kept leases are released at the
next renewal, and the rooms with work are drained again by whoever takes them.
"""

from __future__ import annotations

import logging
import time

from bot.storage.leases import Leases, process_key, room_key

log = logging.getLogger(__name__)


class RoomLeases:
    def __init__(self, leases: Leases, owner: str, ttl_ms: int) -> None:
        self._leases = leases
        self.owner = owner
        self._ttl_ms = ttl_ms
        # No other process was live at the last look (False until looked: the safe side).
        self.alone = False
        # Rooms being drained here, and those found taken over at renewal.
        self.held: set[str] = set()
        self.lost: set[str] = set()
        # Rooms drained while alone whose lease is kept: when it was last taken or renewed.
        self._kept: dict[str, float] = {}

    async def announce(self) -> None:
        """Take (or renew) this process's own lease and look whether it is alone."""
        await self._leases.take(process_key(self.owner), self.owner, self._ttl_ms)
        self.alone = not await self._leases.others_live(self.owner)

    async def take(self, room_id: str) -> bool:
        """Take the room's lease to drain it; False while another live process holds it."""
        kept = self._kept.pop(room_id, None)
        # A kept lease renewed within half its time is surely still ours: no round trip.
        fresh = kept is not None and time.monotonic() - kept < self._ttl_ms / 2000
        if not fresh and not await self._leases.take(room_key(room_id), self.owner, self._ttl_ms):
            return False
        self.held.add(room_id)
        self.lost.discard(room_id)
        self._kept[room_id] = kept if fresh and kept is not None else time.monotonic()
        return True

    async def drained(self, room_id: str) -> None:
        """The room's drain ended: release its lease, or keep it while alone."""
        self.held.discard(room_id)
        if room_id in self.lost:
            self._kept.pop(room_id, None)
            return
        if self.alone:
            return  # kept (its time was set at `take`)
        self._kept.pop(room_id, None)
        await self._leases.release(room_key(room_id), self.owner)

    async def renew(self) -> None:
        """Renew every lease held (this process's own too, taken again if it expired), look
        whether another process is live, and release the kept rooms if one is."""
        rooms = self.held | set(self._kept)
        keys = [process_key(self.owner), *(room_key(room) for room in rooms)]
        renewed_at = time.monotonic()
        lost = await self._leases.renew(keys, self.owner, self._ttl_ms)
        if process_key(self.owner) in lost:
            # Expired (the loop stalled past the lease, or the database was away): take it
            # again, so others stop thinking this process is gone.
            lost.discard(process_key(self.owner))
            await self._leases.take(process_key(self.owner), self.owner, self._ttl_ms)
        for key in lost:
            room_id = key.removeprefix("room:")
            self._kept.pop(room_id, None)
            if room_id in self.held:
                self.lost.add(room_id)
                log.warning(
                    "lost the lease of room %s (renewed too late) to another process", room_id
                )
        for room_id in self._kept:
            self._kept[room_id] = renewed_at
        self.alone = not await self._leases.others_live(self.owner)
        if not self.alone:
            await self.release_kept()

    async def release_kept(self) -> None:
        """Give up the leases of rooms not being drained (kept while alone)."""
        idle = [room for room in self._kept if room not in self.held]
        for room_id in idle:
            del self._kept[room_id]
        if idle:
            await self._leases.release_many([room_key(room) for room in idle], self.owner)

    async def release_all(self) -> None:
        """This process stops: what it leaves (intake, interrupted jobs) is anyone's now."""
        await self.release_kept()
        await self._leases.release(process_key(self.owner), self.owner)
