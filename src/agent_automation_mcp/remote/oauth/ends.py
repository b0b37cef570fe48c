"""Which grants ended, and how far each one's refreshes went, kept by every replica as well as in Redis: so an end
outlives Redis losing its data (restarted empty, a failover to an empty copy) as the sign-in itself does.

Redis answers first, at once for every replica (`store.py`): a revocation holds everywhere on the next request.
Each replica also keeps in memory (`MemoryStore`, bounded) every end it made or learnt, reading the store's index
of ends every few seconds (`sync`, run by `remote/redis_watch.py`), and the chains it advanced. When the watch finds
that Redis lost its data, each replica puts back what it holds; a chain goes back to the furthest step any replica
saw. While Redis does not answer, a replica checks what it holds: ends made before the outage hold, a refresh
token spent again on this replica is caught, and an end made meanwhile (`/revoke`) holds on this replica at once
and is given to Redis when it answers. What only one replica knew is lost if that replica stops before Redis is
back; the operator's ends (`cutoffs.py`) hold whatever happens.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Final

from .store import INDEX_PAGE, MemoryStore, Store, StoreUnavailable

SYNC_PAGES: Final = 20  # pages of the index read at most per sync: as many ends as the mirror holds
SYNC_SLACK_MS: Final = 5_000  # the index is read again this far back: ends written at the same moment are not missed


class Ends:
    def __init__(self, store: Store) -> None:
        self.store = store
        # Without Redis the store is this process's memory already: nothing to mirror.
        self.mirror = store if isinstance(store, MemoryStore) else MemoryStore()
        self._unshared: set[str] = set()  # ends made here while the store did not answer
        self._read_from = 0  # ms, Redis' clock: where the next read of the index starts
        self._give_back_all = False  # Redis lost its data, and has not had all this replica holds yet

    @property
    def mirrored(self) -> bool:
        return self.mirror is not self.store

    async def ended(self, grant_id: str) -> bool:
        """Whether the grant ended: as this replica knows it, else as the store does (not at all if it cannot say)."""
        if await self.mirror.ended(grant_id):
            return True
        if not self.mirrored:
            return False
        try:
            ended = await self.store.ended(grant_id)
        except StoreUnavailable:
            return False  # not known to have ended: served on its seal until the store answers
        if ended:
            await self.mirror.end(grant_id)
        return ended

    async def end(self, grant_id: str) -> None:
        """End the grant here at once, and in the store; `StoreUnavailable` when the store did not take it (it is
        given the end when it answers again)."""
        await self.mirror.end(grant_id)
        if self.mirrored:
            try:
                await self.store.end(grant_id)
            except StoreUnavailable:
                self._unshared.add(grant_id)
                raise

    async def advance(self, grant_id: str, step: int, pair: str) -> tuple[str, str | None]:
        """`Store.advance`, in the store; on this replica's own memory while the store does not answer, or when this
        replica spent the step itself (the store may have lost that: a retry gets its pair, a reuse ends the grant)."""
        if not self.mirrored:
            return await self.store.advance(grant_id, step, pair)
        if await self.mirror.ended(grant_id):
            return "ended", None
        seen = self.mirror.chain_at(grant_id)
        if seen is not None and seen > step:
            outcome, issued = await self.mirror.advance(grant_id, step, pair)
            if outcome == "reused":
                await self._end_everywhere(grant_id)
            return outcome, issued
        try:
            outcome, issued = await self.store.advance(grant_id, step, pair)
        except StoreUnavailable:
            return await self.mirror.advance(grant_id, step, pair)
        if outcome == "ok":
            await self.mirror.advance(grant_id, step, pair)
        elif outcome in ("reused", "ended"):
            await self.mirror.end(grant_id)
        return outcome, issued

    async def sync(self, lost: bool) -> None:
        """Give the store the ends it lacks (all this replica holds when it `lost` its data, else those made while it
        did not answer), then learn the ends other replicas made. `StoreUnavailable` when it does not answer."""
        if not self.mirrored:
            return
        self._give_back_all |= lost
        if self._give_back_all:
            ends, chains = self.mirror.marks()
            await self.store.restore(ends, chains)
            self._give_back_all, self._read_from = False, 0
        elif self._unshared:
            ends = [end for end in self.mirror.marks()[0] if end[0] in self._unshared]
            await self.store.restore(ends, [])
        self._unshared.clear()
        for _ in range(SYNC_PAGES):
            page = await self.store.ends_since(self._read_from)
            for grant_id, at in page:
                await self.mirror.end(grant_id, at)
            if len(page) < INDEX_PAGE:
                if page:
                    self._read_from = max(self._read_from, page[-1][1] - SYNC_SLACK_MS)
                return
            self._read_from = page[-1][1]

    async def synced(self, lost: bool) -> None:
        """`sync`, for `remote/redis_watch.py`: a store that does not answer is tried again at the next look."""
        with suppress(StoreUnavailable):
            await self.sync(lost)

    async def _end_everywhere(self, grant_id: str) -> None:
        with suppress(StoreUnavailable):  # ended here; the store has it when it answers
            await self.end(grant_id)
