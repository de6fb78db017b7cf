"""Many rows into one table from Python, a hundred to a statement.

`executemany` steps its one-row statement once per row, and the sqlite3 module's work around
each step (reset, clear the bindings, fetch the next parameter tuple) cost about as much as
SQLite's own insert: 200,000 rows of six columns, 495-640 ms with `executemany`, 385 ms as
statements of 100 rows (`INSERT ... VALUES (...), (...), ...`), for a table whose rows go in
at its end (`entries`: a push of 500 new streams brings 5,000). Not for an index-organised
table such as `stream_labels`, whose inserts land all over its key: there the two took the
same time.
"""

from __future__ import annotations

import sqlite3
from itertools import chain
from typing import Iterable, Sequence

ROWS_PER_STATEMENT = 100  # 600 parameters for 6 columns: far under SQLite's 32,766


def insert_rows(conn: sqlite3.Connection, head: str, width: int,
                rows: Iterable[Sequence]) -> None:
    """`head VALUES (?, ...), ...` for every row (`width` values each), in statements of
    ROWS_PER_STATEMENT rows and one `executemany` for the rest, in order."""
    flat = list(chain.from_iterable(rows))
    n = len(flat) // width
    one = "(" + ", ".join(["?"] * width) + ")"
    full = n - n % ROWS_PER_STATEMENT
    if full:
        sql = f"{head} VALUES {', '.join([one] * ROWS_PER_STATEMENT)}"
        step = width * ROWS_PER_STATEMENT
        for start in range(0, full * width, step):
            conn.execute(sql, flat[start:start + step])
    if full < n:
        rest = flat[full * width:]
        conn.executemany(f"{head} VALUES {one}", zip(*[iter(rest)] * width))
