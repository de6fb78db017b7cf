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
