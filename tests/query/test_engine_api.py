"""The Python entry points other engines build on: iter_pipeline and iter_samples."""

from __future__ import annotations

import pytest

from tests.query.conftest import OLD_DATA, push

T = 1_700_000_000 * 10**9
S = 10**9


@pytest.fixture(scope="module")
def reader(tmp_path_factory, storage_state):
    from tests.conftest import engine_reader, matrix_client

    with matrix_client(tmp_path_factory.mktemp("api") / "data", OLD_DATA,
                       storage_state) as c:
        push(c, {"app": "a"}, [[str(T + 3 * S), "took=3s size=1KB"],
                               [str(T + 1 * S), "took=1s size=2KB"],
                               [str(T + 5 * S), "took=oops size=4KB"]])
        push(c, {"app": "b"}, [[str(T + 2 * S), "took=250ms"], [str(T + 4 * S), "nothing"]])
        with engine_reader(c) as make:  # the engine reads on a reader of its own
            yield make


def test_iter_pipeline_is_oldest_first_with_final_labels(reader):
    from logql import parse_expr
    from logql.engine.logs import iter_pipeline
    from logql.engine.results import QueryStats

    stats = QueryStats()
    got = list(iter_pipeline(reader(), "fake", parse_expr('{app=~"a|b"} | logfmt | took != ""'),
                             T, T + 10 * S, stats=stats))
    assert [(ts - T) // S for ts, _, _ in got] == [1, 2, 3, 5]
    assert got[1][2] == {"app": "b", "detected_level": "unknown", "service_name": "b",
                         "took": "250ms"}
    assert stats.post_filter_lines == 4 and stats.lines_scanned == 5 and stats.streams == 2
    by_stream = list(iter_pipeline(reader(), "fake", parse_expr('{app=~"a|b"}'), T, T + 10 * S,
                                   ordered=False))
    # stream after stream, each oldest first; which stream comes first is the reader's
    # choice (SQLite: ids in creation order, ClickHouse: ids are hashes)
    got = [(labels["app"], (ts - T) // S) for ts, _, labels in by_stream]
    assert got in ([("a", 1), ("a", 3), ("a", 5), ("b", 2), ("b", 4)],
                   [("b", 2), ("b", 4), ("a", 1), ("a", 3), ("a", 5)])


def test_iter_samples_unwraps_with_conversion_and_errors(reader):
    from logql import parse_expr
    from logql.engine.logs import iter_samples

    expr = parse_expr('sum_over_time({app="a"} | logfmt | unwrap duration(took) [1m])')
    log_range = expr.log_range
    got = list(iter_samples(reader(), "fake", log_range.query, log_range.unwrap, T, T + 10 * S))
    assert [(ts - T) // S for ts, _, _ in got] == [1, 3, 5]
    assert [v for _, v, _ in got] == [1.0, 3.0, 0.0]
    assert "took" not in got[0][2] and got[0][2]["size"] == "2KB"
    assert got[2][2]["__error__"] == "SampleExtractionErr"
    expr = parse_expr('sum_over_time({app="a"} | logfmt | unwrap bytes(size) [1m])')
    values = [v for _, v, _ in iter_samples(reader(), "fake", expr.log_range.query,
                                            expr.log_range.unwrap, T, T + 10 * S)]
    assert values == [2000.0, 1000.0, 4000.0]
