"""quantile_over_time keeps one sorted window as the range slides; every window's answer
must be the one sorting that window from scratch gives, NaN included (Go's order)."""

import math
import random

from logql.engine.functions import quantile, sliding_quantiles


def _spans(n: int, rng: random.Random) -> list[tuple[int, int]]:
    spans, i, j = [], 0, 0
    for _ in range(200):
        j = min(n, j + rng.randint(0, 7))
        i = min(j, i + rng.randint(0, 7))
        if rng.random() < 0.05:          # a gap: the next window shares nothing
            i = j = min(n, j + rng.randint(0, 20))
        spans.append((i, j))
    return spans


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_sliding_windows_equal_sorting_each_window() -> None:
    rng = random.Random(7)
    for trial in range(60):
        n = rng.randint(0, 300)
        values = [rng.choice([rng.uniform(-5, 5), float(rng.randint(0, 3))]) for _ in range(n)]
        if trial % 5 == 0 and n:
            values[rng.randrange(n)] = math.nan
        q = rng.choice([0.0, 0.5, 0.9, 0.99, 1.0, -1.0, 2.0])
        spans = _spans(n, rng)
        got = sliding_quantiles(q, values, spans, lambda: None)
        want = [quantile(q, values[i:j]) if j > i else None for i, j in spans]
        assert all(_same(g, w) for g, w in zip(got, want)), (trial, q)


def test_the_deadline_is_checked_while_windows_slide() -> None:
    calls = []
    sliding_quantiles(0.5, [1.0] * 10, [(0, k) for k in range(1, 200)], lambda: calls.append(1))
    assert len(calls) >= 3
