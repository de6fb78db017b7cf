"""The FTS5 trigram prefilter: which entries may contain a line filter's literals.

The index (`entries_fts`, migrations/0003_fts.sql) covers entries up to a high-water mark
(`fts_state.indexed_through`) that the indexer service (services/indexer.py) raises in
batches after pushes commit; the push path never touches it. A query therefore combines two
sources:

    rows with id <= high_water  ->  only the ids the index names as candidates
    rows with id >  high_water  ->  every row (the small unindexed tail), scanned plainly

The index only narrows: it is folded to lower case and with `detail=none` it knows which
trigrams a line holds, not where, so every candidate must still pass the exact line filter.

Query side (the log-query engine), on a reader connection::

    cnf = pipeline.required_substrings()          # AND of ORs of (needle, case_insensitive)
    pf = fts.prefilter(conn, cnf) if cnf else None
    if pf is not None:
        cond, params = pf.condition("e.id")        # "(e.id > ? OR e.id IN (SELECT ...))"
        sql += " AND " + cond; args += params
    ... every row read is still run through the exact pipeline ...

`prefilter` returns None when the index cannot help: no needle of three or more usable
characters in some OR-clause, nothing indexed yet, or more candidates than `max_candidates`
(then a plain scan is cheaper than a huge id list). Run the prefilter and the scan inside one
read transaction (`BEGIN` ... `COMMIT` on the reader connection) for a single snapshot;
without one the result is still correct (the mark is read before the index and only rises),
except for ids reused after a concurrent delete of the newest rows.

Writer side, inside `Database.write`: `index_batch(conn, limit)` (the indexer's step),
`reset(conn)` (empty the index; the indexer rebuilds it), `rebuild(conn)` (all at once).
Lines holding a NUL character are indexed only up to it (FTS5 reads C strings); their ids
are kept in `fts_partial` and always returned as candidates.
"""

from __future__ import annotations

import json
import sqlite3
from bisect import bisect_left
from dataclasses import dataclass
from typing import Iterable, Sequence

MIN_NEEDLE_CHARS = 3
# More candidate ids than this and the list costs more than the scan it would save.
DEFAULT_MAX_CANDIDATES = 50_000
# A needle's trigrams are ANDed; beyond this many the extra selectivity is not worth the
# doclist reads (kept: first, last and evenly spaced ones in between).
MAX_TRIGRAMS_PER_NEEDLE = 12

# (needle, case_insensitive); the shape logql's LineFilter.required_substrings() yields
Needle = tuple[str, bool]


@dataclass(frozen=True)
class FtsPrefilter:
    """Candidates from the index for rows up to `high_water`; rows above it are not covered.

    `ids` is sorted ascending and holds every indexed entry id (of any tenant) whose line can
    contain the needles, plus possibly others; `match` is the FTS5 query it came from.
    """
    high_water: int
    match: str
    ids: list[int]

    def condition(self, id_column: str = "id") -> tuple[str, list]:
        """SQL restricting a scan of entries to possible matches, with its parameters.

        `id_column` names the entries id in the caller's statement (`id`, `e.id`); it is SQL
        text from the caller's code, never a user value.
        """
        if not id_column.replace(".", "").replace("_", "").isalnum():
            raise ValueError(f"not a column reference: {id_column!r}")
        return (f"({id_column} > ? OR {id_column} IN (SELECT value FROM json_each(?)))",
                [self.high_water, json.dumps(self.ids)])

    def admits(self, entry_id: int) -> bool:
        """Python-side form of `condition` for callers that filter ids themselves."""
        if entry_id > self.high_water:
            return True
        return _contains_sorted(self.ids, entry_id)


def _contains_sorted(ids: list[int], value: int) -> bool:
    i = bisect_left(ids, value)
    return i < len(ids) and ids[i] == value


# -- turning needles into an FTS5 query -------------------------------------------------------

def _runs(text: str, case_insensitive: bool) -> list[str]:
    """Pieces of the needle the index can answer for exactly-or-wider.

    The index folds case with SQLite's Unicode tables (verified: K/k/K-sign, s/long s, Greek
    sigmas fold together). LogQL's `(?i)` is Go's simple case folding, whose orbits differ
    from SQLite's for some non-ASCII letters (scripts newer than SQLite's Unicode 6.1 tables),
    so a case-insensitive needle only contributes its ASCII runs. NUL ends the FTS5 query
    text early, so it splits runs too.
    """
    runs, current = [], []
    for ch in text:
        if ch == "\x00" or (case_insensitive and not ch.isascii()):
            if current:
                runs.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        runs.append("".join(current))
    return [r for r in runs if len(r) >= MIN_NEEDLE_CHARS]


def _trigrams(needle: str, case_insensitive: bool) -> list[str]:
    """Distinct trigrams (ignoring case: the index folds it) of the needle's usable runs."""
    grams: list[str] = []
    keys: set[str] = set()
    for run in _runs(needle, case_insensitive):
        for i in range(len(run) - 2):
            gram = run[i:i + 3]
            key = gram.lower()
            if key not in keys:
                keys.add(key)
                grams.append(gram)
    if len(grams) > MAX_TRIGRAMS_PER_NEEDLE:
        last = len(grams) - 1
        step = last / (MAX_TRIGRAMS_PER_NEEDLE - 1)
        grams = [grams[round(i * step)] for i in range(MAX_TRIGRAMS_PER_NEEDLE)]
    return grams


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def match_expression(cnf: Sequence[Sequence[Needle]]) -> str | None:
    """The FTS5 MATCH text for an AND of ORs of needles, or None when no clause is usable.

    A clause (an OR) is usable only if every alternative yields a trigram: one short
    alternative could match lines the index knows nothing about. Unusable clauses are left
    out, which only widens the candidate set.
    """
    clauses = []
    for clause in cnf:
        alternatives = []
        for needle, ci in clause:
            grams = _trigrams(needle, ci)
            if not grams:
                alternatives = []
                break
            alternatives.append(" AND ".join(_quote(g) for g in grams))
        if not alternatives:
            continue
        if len(alternatives) == 1:
            clauses.append(alternatives[0])
        else:
            clauses.append("(" + " OR ".join(f"({a})" for a in dict.fromkeys(alternatives))
                           + ")")
    if not clauses:
        return None
    return " AND ".join(dict.fromkeys(clauses))


# -- reading --------------------------------------------------------------------------------

def high_water(conn: sqlite3.Connection) -> int:
    """The highest entries.id covered by the index (0 before the first batch)."""
    row = conn.execute("SELECT indexed_through FROM fts_state WHERE id = 1").fetchone()
    return row[0] if row else 0


def candidate_ids(conn: sqlite3.Connection, match: str, limit: int | None = None) -> list[int]:
    """Indexed entry ids whose trigrams satisfy `match`, ascending (at most `limit`)."""
    if limit is None:
        rows = conn.execute("SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?", (match,))
    else:
        rows = conn.execute("SELECT rowid FROM entries_fts WHERE entries_fts MATCH ? LIMIT ?",
                            (match, limit))
    return [r[0] for r in rows]


def prefilter(conn: sqlite3.Connection, cnf: Sequence[Sequence[Needle]] | None, *,
              max_candidates: int = DEFAULT_MAX_CANDIDATES) -> FtsPrefilter | None:
    """Index candidates for lines that must contain `cnf` (AND of ORs of needles).

    None means "no narrowing": scan every row and filter exactly, as without an index.
    """
    if not cnf:
        return None
    match = match_expression(cnf)
    if match is None:
        return None
    hw = high_water(conn)  # read before the index: the index holds at least this much
    if hw == 0:
        return None
    ids = candidate_ids(conn, match, max_candidates + 1)
    if len(ids) > max_candidates:
        return None
    partial = [r[0] for r in conn.execute("SELECT id FROM fts_partial ORDER BY id")]
    if partial:
        ids = sorted(set(ids).union(partial))
    return FtsPrefilter(high_water=hw, match=match, ids=ids)


def index_status(conn: sqlite3.Connection) -> dict[str, int]:
    """{"indexed_through": mark, "max_id": newest entry id, "pending": rows not yet indexed}."""
    hw = high_water(conn)
    newest = conn.execute("SELECT max(id) FROM entries").fetchone()[0] or 0
    pending = conn.execute("SELECT count(*) FROM entries WHERE id > ?", (hw,)).fetchone()[0]
    return {"indexed_through": hw, "max_id": newest, "pending": pending}


# -- writing (the indexer, inside Database.write) ------------------------------------------------

def index_batch(conn: sqlite3.Connection, limit: int) -> int:
    """Fold the next `limit` unindexed entries into the index; return how many were added."""
    hw = high_water(conn)
    upper = conn.execute(
        "SELECT max(id) FROM (SELECT id FROM entries WHERE id > ? ORDER BY id LIMIT ?)",
        (hw, limit)).fetchone()[0]
    if upper is None:
        return 0
    cur = conn.execute("INSERT INTO entries_fts (rowid, line) "
                       "SELECT id, line FROM entries WHERE id > ? AND id <= ?", (hw, upper))
    # the index sees a line only up to its first NUL: such rows are always candidates
    conn.execute("INSERT INTO fts_partial (id) SELECT id FROM entries WHERE id > ? AND id <= ? "
                 "AND instr(CAST(line AS BLOB), x'00') > 0", (hw, upper))
    added = cur.rowcount
    conn.execute("UPDATE fts_state SET indexed_through = ? WHERE id = 1", (upper,))
    return added


def unindexed_ids_exist(conn: sqlite3.Connection) -> bool:
    hw = high_water(conn)
    return conn.execute("SELECT 1 FROM entries WHERE id > ? LIMIT 1", (hw,)).fetchone() is not None


def reset(conn: sqlite3.Connection) -> None:
    """Empty the index and its mark (repair): the indexer then rebuilds it from entries."""
    conn.execute("INSERT INTO entries_fts (entries_fts) VALUES ('delete-all')")
    conn.execute("DELETE FROM fts_partial")
    conn.execute("UPDATE fts_state SET indexed_through = 0 WHERE id = 1")


def rebuild(conn: sqlite3.Connection) -> int:
    """Re-create the whole index from entries in this transaction; return the new mark.

    For repairs and tests; the indexer does the same work in small batches."""
    reset(conn)
    newest = conn.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
    if newest:
        conn.execute("INSERT INTO entries_fts (rowid, line) SELECT id, line FROM entries")
        conn.execute("INSERT INTO fts_partial (id) SELECT id FROM entries "
                     "WHERE instr(CAST(line AS BLOB), x'00') > 0")
        conn.execute("UPDATE fts_state SET indexed_through = ? WHERE id = 1", (newest,))
    return newest


def needles_from_texts(texts: Iterable[str], case_insensitive: bool = False) -> list[list[Needle]]:
    """Convenience: every text must occur (one single-needle clause per text)."""
    return [[(t, case_insensitive)] for t in texts]
