"""The pre-parser check for `| parser | name="value"` changes no answer, only the work."""

from __future__ import annotations

import json

import pytest

from logql.plan import compile_log_query
from logql.syntax.parser import parse_expr
from logql.pipeline.stages import Pipeline
from logql.pipeline.label_filters import RequiredLabelValues

QUERIES = [
    '{job="x"} | logfmt | level="error"',
    '{job="x"} | json | level="error", status="500"',
    '{job="x"} |= "GET" | logfmt | method="GET" | level="info"',
    '{job="x"} | json | user_id="42"',
    '{job="x"} | regexp "level=(?P<level>\\\\w+)" | level="warn"',
    '{job="x"} | pattern "<_> level=<level> <_>" | level="error"',
    '{job="x"} | logfmt lvl="level" | lvl="error"',
]

LINES = [
    'level=error method=GET status=500 msg="db down"',
    'level=info method=GET status=200',
    'level="err\\u006fr" method=POST',          # an escape hides the value
    'level=warn msg="error later in the line"',
    'msg="no level here" status=500',
    '{"level":"error","status":500,"user":{"id":42}}',
    '{"level":"info","status":"500"}',
    '{"level":"\\u0065rror","status":500}',
    '{"lvl":"error"}',
    "plain text error line",
    "",
]
STREAMS = [{"job": "x"}, {"job": "x", "level": "error"}, {"job": "x", "status": "500"}]
METADATA = [None, {"level": "error"}, {"user_id": "42"}, {"detected_level": "info"}]


def _run(pipeline: Pipeline, stream: dict, line: str, md: dict | None):
    out = pipeline.for_stream(stream).process(1, line, md)
    return None if out is None else (out[0], dict(out[1].labels()))


@pytest.mark.parametrize("query", QUERIES)
def test_same_answers_with_and_without_the_check(query):
    plan = compile_log_query(parse_expr(query))
    assert isinstance(plan.pipeline.stages[0], RequiredLabelValues)
    check = plan.pipeline.stages[0]
    without = Pipeline(plan.pipeline.stages[1:])
    spared = 0
    for stream in STREAMS:
        for md in METADATA:
            for line in LINES:
                want = _run(without, stream, line, md)
                got = _run(plan.pipeline, stream, line, md)
                assert got == want, (query, stream, md, line)
                builder = plan.pipeline.for_stream(stream).labels.reset(md)
                spared += check.process(1, line, builder) is None
    assert spared > 0  # the check does spare the parsers some lines


@pytest.mark.parametrize("query", [
    '{job="x"} | logfmt | label_format level=lvl | level="error"',   # a label built later
    '{job="x"} | decolorize | logfmt | level="error"',               # line changed first
    '{job="x"} | line_format "{{.x}}" | logfmt | level="error"',
    '{job="x"} | logfmt | level!="error"',
    '{job="x"} | logfmt | level="error" or level="warn"',
    '{job="x"} | level="error" | logfmt',                            # no parser before it
    '{job="x"} | unpack | level="error"',
    '{job="x"} | json | __error__="JSONParserErr"',                  # set by the parser itself
    '{job="x"} | logfmt --strict | __error__="LogfmtParserErr", __error_details__="x"',
])
def test_not_applied_where_the_value_may_not_be_in_the_line(query):
    plan = compile_log_query(parse_expr(query))
    assert not any(isinstance(s, RequiredLabelValues) for s in plan.pipeline.stages)


def test_loghub_style_answers_unchanged_over_http(make_client):
    client = make_client({"limits_config": {"reject_old_samples": False}})
    lines = [f'level={lvl} i={i} msg="{word}"' for i, (lvl, word) in enumerate(
        [("error", "x"), ("info", "error"), ("warn", "y"), ("error", "z")] * 5)]
    values = [[str(1_700_000_000_000_000_000 + i), line] for i, line in enumerate(lines)]
    body = {"streams": [{"stream": {"job": "x"}, "values": values},
                        {"stream": {"job": "x", "level": "error"}, "values": values[:3]}]}
    r = client.post("/logstore/api/v1/push", content=json.dumps(body),
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 204
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{job="x"} | logfmt | level="error"', "start": "1700000000",
        "end": "1700000001", "limit": "1000", "direction": "forward"})
    assert r.status_code == 200
    got = sorted((json.dumps(s["stream"], sort_keys=True), v[1])
                 for s in r.json()["data"]["result"] for v in s["values"])
    want = sorted(
        [(json.dumps({"detected_level": "error", "i": str(i), "job": "x", "level": "error",
                      "msg": w, "service_name": "x"}, sort_keys=True), line)
         for i, line in enumerate(lines) for w in [line.split('msg="')[1][:-1]]
         if line.startswith("level=error")] +
        # the stream with a level label keeps every line: its parsed level is renamed (and
        # its detected_level comes from that label)
        [(json.dumps({"detected_level": "error", "i": str(i), "job": "x", "level": "error",
                      "level_extracted": lvl, "msg": line.split('msg="')[1][:-1],
                      "service_name": "x"}, sort_keys=True), line)
         for i, line in enumerate(lines[:3]) for lvl in [line.split()[0][6:]]])
    assert got == want


def test_sql_conditions_change_no_answer(make_client):
    """The same check runs in SQLite, per query and only when no selected stream carries the
    label: answers over HTTP equal the pipeline without any check, entry by entry."""
    client = make_client({"limits_config": {"reject_old_samples": False,
                                            "discover_log_levels": False}})
    base = 1_700_000_000_000_000_000
    streams = []
    ts = base
    for labels in STREAMS:
        values = []
        for md in METADATA:
            for line in LINES:
                ts += 1
                values.append([str(ts), line, md] if md else [str(ts), line])
        streams.append({"stream": labels, "values": values})
    r = client.post("/logstore/api/v1/push", content=json.dumps({"streams": streams}),
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 204, r.text
    # all streams (one has a level label: no SQL check), then those without one (SQL check)
    for selector, keep in (('{job="x"}', lambda s: True),
                           ('{job="x", level=""}', lambda s: "level" not in s)):
        for query in QUERIES:
            plan = compile_log_query(parse_expr(query))
            reference = Pipeline(plan.pipeline.stages[1:])
            want = []
            for stream in streams:
                if not keep(stream["stream"]):
                    continue
                labels = {**stream["stream"], "service_name": "x"}
                for value in stream["values"]:
                    md = value[2] if len(value) > 2 else None
                    out = _run(reference, labels, value[1], md)
                    if out is not None:
                        want.append((json.dumps(out[1], sort_keys=True), value[0], out[0]))
            r = client.get("/logstore/api/v1/query_range", params={
                "query": query.replace('{job="x"}', selector, 1), "start": str(base),
                "end": str(ts + 1), "limit": "5000"})
            assert r.status_code == 200, r.text
            got = [(json.dumps(st["stream"], sort_keys=True), v[0], v[1])
                   for st in r.json()["data"]["result"] for v in st["values"]]
            assert sorted(got) == sorted(want), (selector, query)
            # metric queries read through the same conditions
            log_query = query.replace('{job="x"}', selector, 1)
            # (lines whose parser failed would fail a metric query: they are filtered out)
            metric = f'sum(count_over_time({log_query} | __error__="" [1h]))'
            r = client.get("/logstore/api/v1/query", params={"query": metric,
                                                              "time": str(ts + 1)})
            assert r.status_code == 200, r.text
            counts = [s["value"][1] for s in r.json()["data"]["result"]]
            clean = [w for w in want if "__error__" not in json.loads(w[0])]
            assert counts == ([str(len(clean))] if clean else []), (selector, query)
