"""Many rows into one statement's `VALUES` list, from Python, in a few statements.

The sqlite3 module gives up the GIL around every step of a statement, and `executemany` steps
once per row. While another thread runs Python (the event loop, the threads that read the
query workers' answers), each step's return waits for the GIL: with one such thread beside
it, a realistic push's append (30 streams: their packs, ranges and rollup tallies, about 200
steps) took 45-48 ms instead of 2.3-2.4 (bench/REPORT.md, "Issue 25: the writer's steps and
the GIL"). A statement of many rows is one step.

It also costs less alone: `executemany`'s work around each step (reset, clear the bindings,
fetch the next parameter tuple) was about as much as SQLite's own insert; 200,000 rows of six
columns, 495-640 ms with `executemany`, 385 ms as statements of 100 rows, for a table whose
rows go in at its end (`entries`).
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from itertools import chain
from typing import Iterable, Sequence

ROWS_PER_STATEMENT = 128
MAX_PARAMETERS = 32_766  # SQLite's default SQLITE_MAX_VARIABLE_NUMBER since 3.32


@lru_cache(maxsize=256)
def _sql(template: str, width: int, rows: int) -> str:
    one = "(" + ", ".join(["?"] * width) + ")"
    return template.replace("{values}", ", ".join([one] * rows))


def values_statements(template: str, width: int,
                      rows: Iterable[Sequence]) -> list[tuple[str, list]]:
    """`template` with `{values}` replaced by `(?, ...), (?, ...)` for rows of `width` values,
    as statements over every row in order: ROWS_PER_STATEMENT rows a statement, the rest in
    statements of 64, 32, ... 1 rows, so that a template has at most eight texts to prepare
    and cache. For `INSERT INTO t (...) VALUES {values} [ON CONFLICT ...]` the rows go in one
    after the other, as with `executemany`."""
    flat = list(chain.from_iterable(rows))
    n = len(flat) // width
    most = min(ROWS_PER_STATEMENT, MAX_PARAMETERS // width)
    out = []
    done = 0
    while done < n:
        k = most if n - done >= most else 1 << ((n - done).bit_length() - 1)
        out.append((_sql(template, width, k), flat[done * width:(done + k) * width]))
        done += k
    return out


def execute_values(conn: sqlite3.Connection, template: str, width: int,
                   rows: Iterable[Sequence]) -> None:
    """values_statements run now."""
    for sql, params in values_statements(template, width, rows):
        conn.execute(sql, params)
