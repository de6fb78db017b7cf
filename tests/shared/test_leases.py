"""Leases on a real PostgreSQL (storage/shared/leases.py): one holder at a time, handed over
at once by a node that stops and after expiry by one that died, kept by the holder for as
long as it lives."""

from __future__ import annotations

import asyncio
import time

from storage.shared.leases import SharedLeases
from storage.shared.postgres import PostgresState

SECONDS = 0.9  # a short lease: expiry is what the test waits for


async def _until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "the state was never reached"
        await asyncio.sleep(0.05)  # polling for a state, with a deadline


def test_one_holder_handed_over_on_stop_and_on_death(postgres_url):
    async def story() -> None:
        state = PostgresState(postgres_url)
        await state.start()
        a = SharedLeases(state, "a", seconds=SECONDS)
        b = SharedLeases(state, "b", seconds=SECONDS)
        c = SharedLeases(state, "c", seconds=SECONDS)
        try:
            assert await a.holds("ruler") and not await b.holds("ruler")
            # a lives: its lease is renewed in the background long past its length
            began = time.monotonic()
            while time.monotonic() - began < 3 * SECONDS:
                assert await a.holds("ruler") and not await b.holds("ruler")
                await asyncio.sleep(0.1)
            assert await state.read(lambda conn: conn.execute(
                "SELECT holder FROM leases WHERE name = 'ruler'").fetchall()) == [("a",)]

            await a.release_all()  # a stops: b takes over once its refusal is stale
            await _until(lambda: b.holds("ruler"))
            assert not await c.holds("ruler")

            # b dies: nothing renews its lease any more, and c takes over after expiry
            keeper, b._keeper = b._keeper, None
            keeper.cancel()
            await _until(lambda: c.holds("ruler"))
            died = await state.read(lambda conn: conn.execute(
                "SELECT holder FROM leases WHERE name = 'ruler'").fetchall())
            assert died == [("c",)]
        finally:
            for leases in (a, b, c):
                await leases.release_all()
            await state.stop()

    asyncio.run(story())
