"""`sum by (stream labels) (count_over_time(<selector> |= ... [r]))` is counted per group
(logql/engine/summed_scan.py) with the same answer, stats included, as the general path
that keeps a series per stream; the shapes it cannot answer exactly go the general way."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.helpers import JSON_HEADERS, PUSH
from tests.query.conftest import OLD_DATA, push

T = 1_700_000_000 * 10**9
S = 10**9
STREAMS = 300   # enough for the group labels to come from the postings


@pytest.fixture(scope="module")
def stored(tmp_path_factory, storage_state):
    from tests.conftest import engine_reader, matrix_client

    with matrix_client(tmp_path_factory.mktemp("summed") / "data", OLD_DATA,
                       storage_state) as c:
        streams = []   # one push: on ClickHouse each push is an insert of its own
        for i in range(STREAMS):
            labels = {"env": "prod", "app": f"a{i % 7}", "pod": f"p{i}"}
            if i % 10 == 0:
                labels["team"] = "t1"
            values = [[str(T + (i * 7 + k * 53) % 900 * S + i), line]
                      for k, line in enumerate([f"level=error pod={i} msg=oops",
                                                f"level=info pod={i} msg=fine",
                                                f"level=error pod={i} msg=disk full",
                                                f"level=debug pod={i} err=none"])]
            if i % 3 == 0:
                values[0].append({"trace_id": f"t{i}", "app": "from-metadata"})
            streams.append({"stream": labels, "values": values})
        r = c.post(PUSH, content=json.dumps({"streams": streams}), headers=JSON_HEADERS)
        assert r.status_code == 204, r.text
        # lines exactly on window edges (steps are minutes from the epoch): (lo, hi]
        edge = T - T % (60 * S)
        push(c, {"env": "prod", "app": "a1", "pod": "edge"},
             [[str(edge + k * 60 * S), f"level=error edge {k}"] for k in range(1, 12)])
        # a stream whose metadata carries an error: its lines are an error series
        push(c, {"env": "bad", "app": "x"},
             [[str(T + 5 * S), "level=error boom", {"__error__": "SomeErr"}]])
        with engine_reader(c) as make:
            yield make, c.app.state.services.db.path


@pytest.fixture
def reader(stored):
    return stored[0]


def _evaluate(reader, text: str, instant: bool, fast: bool, monkeypatch,
              patched: str = "eval_summed_scan_counts"):
    from logql import parse_expr
    from logql.engine import metrics, range as range_agg, summed_scan
    from logql.engine.results import QueryStats
    from logql.errors import QueryError
    from services.read.visibility import VisibleReader

    taken = []
    real = getattr(summed_scan, patched, None) or getattr(range_agg, patched)

    def spy(*args):
        out = real(*args) if fast else None
        taken.append(out is not None)
        return out
    monkeypatch.setattr(metrics, patched, spy)
    stats = QueryStats()
    try:
        out = metrics.evaluate_metric(VisibleReader(reader()), "fake", parse_expr(text),
                                      start_ns=T - 600 * S, end_ns=T + (600 if instant else 1200) * S,
                                      step_ns=60 * S, instant=instant, stats=stats)
    except QueryError as exc:
        return ("error", str(exc)), any(taken)
    counts = {k: v for k, v in dataclasses.asdict(stats).items() if "time" not in k}
    return (out.result_type, out.result, counts), any(taken)


@pytest.mark.parametrize("text, instant", [
    ('sum by (app) (count_over_time({env="prod"} |= "level=error" [5m]))', False),
    ('sum by (app) (count_over_time({env="prod"} |= "level=error" [5m]))', True),
    ('sum(count_over_time({env=~"prod|dev"} |= "level" != "debug" [2m] offset 1m))', False),
    ('sum by (env, app) (count_over_time({env="prod"} |~ "disk|oops" [10m]))', True),
    ('sum by (pod) (count_over_time({env="prod", app="a3"} |= "error" [1m]))', False),
])
def test_counted_per_group_as_the_general_path_counts(reader, monkeypatch, text, instant):
    general, _ = _evaluate(reader, text, instant, False, monkeypatch)
    grouped, taken = _evaluate(reader, text, instant, True, monkeypatch)
    assert taken
    assert grouped == general
    assert general[0] in ("matrix", "vector") and general[1]


@pytest.mark.parametrize("text", [
    # a stream without the label: metadata could give it, line by line
    'sum by (team) (count_over_time({env="prod"} |= "error" [5m]))',
    # a parser may add labels and errors
    'sum by (app) (count_over_time({env="prod"} |= "error" | logfmt [5m]))',
    # not the root: topk would see the groups' order
    'topk(2, sum by (app) (count_over_time({env="prod"} |= "error" [5m])))',
    # the metadata's __error__ makes an error series: the general path's answer
    'sum by (app) (count_over_time({env="bad"} |= "error" [5m]))',
])
def test_other_shapes_answer_as_before(reader, monkeypatch, text):
    general, _ = _evaluate(reader, text, False, False, monkeypatch)
    grouped, taken = _evaluate(reader, text, False, True, monkeypatch)
    assert not taken
    assert grouped == general


def test_metadata_error_is_the_pipeline_error(reader, monkeypatch):
    got, _ = _evaluate(reader, 'sum by (app) (count_over_time({env="bad"} |= "error" [5m]))',
                       False, True, monkeypatch)
    assert got[0] == "error" and "SomeErr" in got[1]


@pytest.mark.sqlite_only  # the SQLite stream index's two ways to the same values
def test_group_values_from_postings_equal_the_label_sets(stored, monkeypatch):
    from storage import streams
    from storage.db import connect

    conn = connect(stored[1], readonly=True)

    ids = streams.select_stream_ids(conn, "fake", [], None, None)
    names = ["app", "team", "zone"]
    # labels as the decoded label sets give them
    sets = streams.stream_label_sets(conn, ids, "fake")
    want = {sid: tuple(sets[sid].get(n) for n in names) for sid in ids}
    assert sum(v[1] == "t1" for v in want.values()) == STREAMS // 10
    calls = []
    real = streams.stream_label_sets
    monkeypatch.setattr(streams, "stream_label_sets",
                        lambda *a: calls.append(1) or real(*a))
    assert streams.stream_label_values(conn, ids, "fake", names) == want
    assert not calls   # from the postings
    monkeypatch.setattr(streams, "POSTINGS_PER_STREAM", 0)
    assert streams.stream_label_values(conn, ids, "fake", names) == want
    assert calls       # a name with more postings than allowed: from the label sets
    conn.close()


@pytest.mark.parametrize("text, instant", [
    ('sum by (app) (rate({env="prod"}[1h]))', True),
    ('sum by (app) (rate({env="prod"}[5m]))', False),
    ('sum without (pod) (bytes_rate({env=~"prod|bad"}[3m]))', False),
    ('sum by (app, trace_id) (count_over_time({env="prod"}[10m]))', True),
    ('sum(count_over_time({env="prod"} | line_format "x" [7m]))', False),
])
def test_rollup_series_summed_as_the_vector_sum_adds_them(reader, monkeypatch, text, instant):
    """Rates are floats: each group adds its series' values in the order `sum` does."""
    from logql.engine import metrics

    monkeypatch.setattr(metrics, "eval_summed_counts", lambda *a: None)
    fused, taken = _evaluate(reader, text, instant, True, monkeypatch,
                             patched="eval_summed_rollups")
    general, _ = _evaluate(reader, text, instant, False, monkeypatch,
                           patched="eval_summed_rollups")
    assert taken
    assert fused == general and fused[1]
