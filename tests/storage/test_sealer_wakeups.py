"""When a push wakes the sealer (services.upkeep.sealer.PendingHead): only when something may be
due, so that thousands of streams do not cost a look at the whole head per push, and never
later than the rule says (a closed window, a full group, a window that closes)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from services.upkeep.sealer import PendingHead
from storage.blocks.sealing import HeadScan

MIN = 60 * 10**9


def pushed(*firsts: tuple[int, int], rows: int = 1,
           packed: tuple[int, ...] = ()) -> SimpleNamespace:
    """A committed push as storage.entries.AppendResult tells it: `rows` lines to each of
    the streams (stream id, oldest timestamp) named."""
    return SimpleNamespace(inserted=rows * len(firsts), firsts=list(firsts),
                           packed=list(packed),
                           written=[(sid, {}, [(first, 0, "x", None)] * rows)
                                    for sid, first in firsts])


def known_head(now: list[int], largest_open: int = 0, next_due: int | None = None,
               most_packs_open: int = 0):
    pending = PendingHead(window_ns=10 * MIN, grace_ns=MIN, max_rows=100_000,
                          clock=lambda: now[0]) if most_packs_open else \
        PendingHead(window_ns=10 * MIN, grace_ns=MIN, max_rows=100, clock=lambda: now[0])
    assert pending.look() is None  # nothing known yet: the first look covers the head
    pending.looked(HeadScan([], next_due, largest_open, most_packs_open), None, complete=True)
    return pending


def test_until_a_whole_look_completes_every_push_wakes_the_sealer():
    now = [100 * MIN]
    pending = PendingHead(window_ns=10 * MIN, grace_ns=MIN, max_rows=100, clock=lambda: now[0])
    assert pending.pushed(pushed((1, now[0]))) is True
    assert pending.look() is None
    pending.looked(HeadScan([], None, 0), None, complete=False)  # rows left behind
    assert pending.pushed(pushed((1, now[0]))) is True


def test_a_push_into_the_open_window_does_not_wake_but_sets_the_timer():
    now = [100 * MIN + 30 * 10**9]
    pending = known_head(now)
    assert pending.pushed(pushed((7, now[0]))) is False
    assert pending.look() is False  # a timer wake now would find nothing
    # the window [100, 110) min closes at 110 min, due after the 1 min grace
    assert pending.timeout(3600.0) == (111 * MIN - now[0]) / 1e9
    assert pending.timeout(60.0) == 60.0
    now[0] = 111 * MIN
    assert pending.pushed(pushed((7, now[0]))) is True
    assert pending.look() is None  # that window is due: a look at the whole head


def test_a_push_into_a_closed_window_wakes_a_look_at_that_stream_only():
    now = [100 * MIN]
    pending = known_head(now)
    assert pending.pushed(pushed((3, 50 * MIN), (4, now[0]))) is True
    assert pending.look() == [3]
    pending.looked(HeadScan([], 111 * MIN, 5), [3], complete=True)
    assert pending.pushed(pushed((4, now[0]))) is False


def test_rows_that_could_fill_the_largest_open_group_wake_a_whole_look():
    now = [100 * MIN]
    pending = known_head(now, largest_open=90, next_due=200 * MIN)
    assert pending.pushed(pushed((1, now[0]), rows=9)) is False
    assert pending.pushed(pushed((2, now[0]), rows=1)) is True
    assert pending.look() is None


def test_many_streams_of_a_few_rows_do_not_wake_a_whole_look():
    """A group is due at max_rows: pushes of many new streams with a few lines each (a
    Kubernetes cluster's pods) cannot fill one, however many rows they add up to; a look
    per push or two read the whole head each time (issue 22: 100,000 new streams)."""
    now = [100 * MIN]
    pending = known_head(now, largest_open=50, next_due=200 * MIN)
    for push in range(4):
        streams = [(sid, now[0]) for sid in range(push * 500, (push + 1) * 500)]
        assert pending.pushed(pushed(*streams, rows=10)) is False  # 20,000 rows in all
    assert pending.look() is False
    # the bound counts each push's fullest stream: 4 x 10 so far, 10 more reach 100
    assert pending.pushed(pushed((7, now[0]), rows=9)) is False
    assert pending.pushed(pushed((8, now[0]), rows=1)) is True
    assert pending.look() is None


def test_a_late_push_during_a_whole_look_is_looked_at_after_it():
    """A push into a closed window that commits while the sealer seals what a look at the
    whole head found (after the head was read) is looked at next, not forgotten until the
    next window closes."""
    now = [100 * MIN]
    pending = PendingHead(window_ns=10 * MIN, grace_ns=MIN, max_rows=100, clock=lambda: now[0])
    assert pending.look() is None  # the whole head is read; sealing what was due begins
    assert pending.pushed(pushed((9, 50 * MIN))) is True  # lines for a closed window
    pending.looked(HeadScan([], 111 * MIN, 5), None, complete=True)
    assert pending.look() == [9]


def test_packs_that_could_fill_one_streams_window_wake_a_whole_look():
    """A window is due at PACKS_DUE packs: a push wakes the sealer once one stream may have
    that many, not when packs spread over many streams add up to it, and never for the rows
    of small pushes (they are not packs)."""
    from storage.blocks.sealing import PACKS_DUE

    now = [100 * MIN]
    pending = known_head(now, next_due=200 * MIN, most_packs_open=PACKS_DUE - 3)
    many = tuple(range(1000, 1000 + 2 * PACKS_DUE))
    assert pending.pushed(pushed(*[(s, now[0]) for s in many], packed=many)) is False
    assert pending.pushed(pushed((1, now[0]), packed=(1,))) is False
    assert pending.pushed(pushed((1, now[0]))) is False  # rows, no pack
    assert pending.pushed(pushed((1, now[0]), packed=(1,))) is False
    assert pending.pushed(pushed((1, now[0]), packed=(1,))) is True  # 3 packs since the look
    assert pending.look() is None


def test_a_look_at_late_lines_waits_for_the_pushes_to_pause():
    """New streams whose first push spans the hour bring lines into a closed window: their
    look waits until pushes pause for QUIET_SECONDS (a look and thousands of tiny blocks
    between the pushes were a fifth of their time), or LATE_DEFER_SECONDS at most while
    they keep coming; a look that is due for another reason never waits."""
    from services.upkeep.sealer import LATE_DEFER_SECONDS, QUIET_SECONDS, LateLines

    t = [1000.0]
    late = LateLines(lambda: t[0])
    assert late.put_off(True) is False  # no push yet: look now
    late.caught_up()  # the sealer looked at them all
    late.pushed()
    t[0] += QUIET_SECONDS / 10
    assert late.put_off(True) is True
    assert late.put_off(False) is False  # a whole look, or nothing late: never put off
    assert late.put_off(True) is True
    assert late.sleep(60.0) == pytest.approx(QUIET_SECONDS * 0.9)
    t[0] += QUIET_SECONDS
    assert late.put_off(True) is False  # the pushes paused
    assert late.sleep(60.0) == 60.0
    late.caught_up()
    # pushes that never pause: the look comes LATE_DEFER_SECONDS after it was put off
    t[0] = 2000.0  # (whole seconds: the steps below add up exactly)
    late.pushed()
    assert late.put_off(True) is True
    first = t[0]
    while t[0] + QUIET_SECONDS / 2 - first < LATE_DEFER_SECONDS:
        t[0] += QUIET_SECONDS / 2
        late.pushed()
        assert late.put_off(True) is True
        assert 0 < late.sleep(60.0) <= QUIET_SECONDS
    t[0] = first + LATE_DEFER_SECONDS
    late.pushed()
    assert late.put_off(True) is False
    # begun, the looks go on while late streams are left, pushes or not
    late.pushed()
    assert late.put_off(True) is False
    late.caught_up()  # none left
    late.pushed()
    assert late.put_off(True) is True  # new late lines wait again


def test_many_late_streams_are_looked_at_a_share_at_a_time(monkeypatch):
    """100,000 new pods with lines before the hour: one look and one round for all of them
    raised the server's peak RSS by 15 MB; each look takes LATE_LOOK_STREAMS of them."""
    from services.upkeep import sealer as sealer_module

    monkeypatch.setattr(sealer_module, "LATE_LOOK_STREAMS", 5)
    now = [100 * MIN]
    pending = known_head(now, next_due=200 * MIN)
    assert pending.pushed(pushed(*[(sid, 50 * MIN) for sid in range(12)])) is True
    assert pending.look() == [0, 1, 2, 3, 4]
    pending.looked(HeadScan([], None, 0), [0, 1, 2, 3, 4], complete=True)
    assert pending.late_only() is True  # the rest is still to be looked at
    assert pending.look() == [5, 6, 7, 8, 9]
    assert pending.look() == [10, 11]
    assert pending.look() is False


@pytest.mark.parametrize("share", [100, 1], ids=["one look", "a look per stream"])
def test_lines_into_a_closed_window_are_sealed_once_the_pushes_pause(tmp_path, monkeypatch,
                                                                     share):
    """Through the sealer's loop, on a real SQLite file and writer: a push into a closed
    window wakes the sealer, whose look waits while pushes come; once they pause, those
    lines are sealed (the pause is on a clock of the test's)."""
    import asyncio

    from services.upkeep import sealer as sealer_module
    from services.upkeep.sealer import QUIET_SECONDS, Sealer
    from storage.db import Database

    monkeypatch.setattr(sealer_module, "LATE_LOOK_STREAMS", share)
    from storage.entries import PreparedStream, append
    from tests.helpers import head_rows

    async def scenario() -> tuple[int, int]:
        db = Database(str(tmp_path))
        db.open()
        t = [0.0]
        # no timer wake within the test: only pushes and the sealer itself wake it
        sealer = Sealer(db, window_ns=10 * MIN, grace_ns=MIN, clock=lambda: 100 * MIN,
                        interval=3600.0)
        sealer.late_lines.monotonic = lambda: t[0]
        try:
            await sealer.start()
            await sealer.seal_due()  # the first look, at an empty head, is done

            async def push(pod: str, ts: int) -> None:
                ps = PreparedStream({"pod": pod}, f'{{pod="{pod}"}}',
                                    rows=[(ts, 1, "a line", None)], first_ts=ts, last_ts=ts)
                result = await db.write(lambda c: append(c, db.stream_ids, "t", [ps], 10 * MIN))
                sealer.notify("t", result)

            await push("a", 50 * MIN)  # into the closed window [50, 60) min
            await push("b", 60 * MIN)
            for _ in range(2):  # rounds now would seal them: the loop must not start one
                await sealer.seal_due()
            assert await db.read(head_rows) == 0
            await push("c", 70 * MIN)
            await push("d", 80 * MIN)

            async def until(check) -> None:
                deadline = asyncio.get_running_loop().time() + 30
                while not await check() and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.05)  # polling for the sealer's loop, with a deadline

            async def put_off() -> bool:
                return sealer.late_lines.since is not None

            await until(put_off)  # the loop woke for the late lines and put their look off
            assert await put_off()
            held = await db.read(head_rows)
            t[0] += QUIET_SECONDS  # the pushes pause
            sealer._wake.set()

            async def sealed() -> bool:
                return await db.read(head_rows) == 0

            await until(sealed)
            left = await db.read(head_rows)

            async def caught_up() -> bool:
                return not sealer.late_lines.going

            await until(caught_up)  # the round that sealed them is over
            # caught up: the next late lines wait for the pushes to pause again
            await push("e", 70 * MIN)
            await until(put_off)
            assert await put_off()
            assert await db.read(head_rows) == 1
            return held, left
        finally:
            await sealer.stop()
            db.close()

    held, left = asyncio.run(scenario())
    assert held == 2  # the late lines waited in the head while pushes came
    assert left == 0  # and were sealed once they paused
