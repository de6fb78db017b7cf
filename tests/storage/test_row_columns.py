"""A packed stream's rows as columns (storage/row_columns.py): what crosses from a query
worker to the server reads back as the rows it was made of."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.row_columns import RowColumns, ts_range

INT64 = st.integers(-2**63, 2**63 - 1)
ROWS = st.lists(st.tuples(INT64, st.integers(0, 2**63 - 1),
                          st.text(max_size=40),  # any character: lengths are in characters
                          st.one_of(st.none(), st.sampled_from(
                              ['{"detected_level":"info"}', '{"detected_level":"warn"}', "{}"]))),
                min_size=1, max_size=60)


@settings(max_examples=400, deadline=None)
@given(ROWS)
def test_columns_read_back_as_the_rows_through_a_pickle(rows):
    columns = RowColumns.of(rows)
    back = pickle.loads(pickle.dumps(columns, protocol=pickle.HIGHEST_PROTOCOL))
    assert len(back) == len(rows)
    assert ts_range(back) == ts_range(rows) == (min(r[0] for r in rows), max(r[0] for r in rows))
    assert back.rows() == rows and list(back) == rows and back[len(rows) - 1] == rows[-1]
    assert back.without_repeats() == (len({(r[0], r[1]) for r in rows}) == len(rows))


def test_one_metadata_text_for_every_row_is_sent_once():
    rows = [(i, i, f"line {i}", '{"detected_level":"info"}') for i in range(100)]
    one = len(pickle.dumps(RowColumns.of(rows)))
    rows[50] = (50, 50, "line 50", None)
    assert pickle.loads(pickle.dumps(RowColumns.of(rows))).rows() == rows
    assert one < len(pickle.dumps(RowColumns.of(rows)))
    assert RowColumns([1, 2], [3, 4], ["a", "b"], (None,)).rows() == [(1, 3, "a", None),
                                                                       (2, 4, "b", None)]


PACKED_ROWS = st.lists(
    st.tuples(st.integers(-2**40, 2**40), st.integers(0, 2**63 - 1),
              # lone surrogates too: a JSON push may escape them, and packs keep them
              st.text(st.characters(blacklist_categories=()), max_size=30),
              st.one_of(st.none(), st.sampled_from(
                  ['{"detected_level":"info"}', '{"detected_level":"warn"}', '{"a":"é"}']))),
    min_size=32, max_size=80)


@settings(max_examples=300, deadline=None)
@given(PACKED_ROWS, st.booleans())
def test_a_packed_stream_pickles_as_its_pack_and_reads_back_as_its_rows(rows, as_columns):
    """A query worker sends a packed stream's lines and metadata once, inside the pack; the
    server reads the rows back in the order they came (the pack sorts them by time)."""
    from storage.entries import PreparedStream, pack_rows

    rows = list({(r[0], r[1]): r for r in rows}.values())  # no repeats: a pack as pushed
    if len(rows) < 32:
        return
    ps = PreparedStream({"a": "b"}, '{a="b"}',
                        rows=RowColumns.of(rows) if as_columns else list(rows))
    pack_rows(ps)
    assert ps.pack is not None and ps.repeats == 0
    back = pickle.loads(pickle.dumps(ps, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(back.rows, RowColumns) and back.rows.pack is back.pack
    assert back.rows._lines is None  # the lines came inside the pack only
    assert len(back.rows) == len(rows) and ts_range(back.rows) == ts_range(rows)
    assert back.rows.rows() == rows
    assert back.pack.block(1).lines == ps.pack.block(1).lines
