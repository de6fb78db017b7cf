"""Items in order, cut into batches bounded by a count and a total weight: how much one
query reads or one writer job rewrites when each item (a stream, a block) costs its rows."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def bounded_batches(items: Sequence[T], weight: Callable[[T], int], max_weight: int,
                    max_items: int, min_items: int = 1) -> list[list[T]]:
    """Consecutive batches of at most `max_items` items whose weights add up to at most
    `max_weight`, except that a batch always takes `min_items` (an item heavier than the
    bound stands alone in a batch of one)."""
    batches: list[list[T]] = []
    batch: list[T] = []
    total = 0
    for item in items:
        w = weight(item)
        if len(batch) >= min_items and (len(batch) >= max_items or total + w > max_weight):
            batches.append(batch)
            batch, total = [], 0
        batch.append(item)
        total += w
    if batch:
        batches.append(batch)
    return batches
