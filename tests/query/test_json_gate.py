"""`| json | name >= N`: the gate before the parser (JsonNumberGate) drops exactly the lines
the parser and the filter would drop, and keeps the rest as they would."""

from __future__ import annotations

import json
import random

import pytest

from logql import parse_expr
from logql.pipeline.json_parser import JsonNumberGate
from logql.pipeline.stages import Pipeline
from logql.plan import compile_log_query

TRICKY = [
    '{"status": 500}', '{"status": 200}', '{"status": "503"}', '{"status": "abc"}',
    '{"status": true}', '{"status": null}', '{"status": [500]}', '{"status": {"code": 500}}',
    '{"status": 1e400}', '{"status": -1e400}', '{"status": 123456789012345678901234567890}',
    '{"status": 9007199254740993}', '{"status": 500.5}', '{"status": "0x1f4"}',
    '{"status": "1_000"}', '{"status": " 500"}', '{"status": "Inf"}', '{"status": "NaN"}',
    '{"status": 200, "status": 500}', '{"status": 500, "status": 200}',
    '{" status ": 500}', '{" status ": 500, "status": 200}', '{"status": 200, " status ": 500}',
    '{"st\\u0061tus": 500}', '{"status": 200, "msg": "st\\u0061tus"}',
    '{"resp": {"status": 500}}', '{"msg": "status is fine", "code": 500}',
    '{"status": 500} trailing', '{"status": 500', 'status=500', '', '[{"status": 500}]',
    '  {"status": 502}  ', '{"Status": 500}', '{"status2": 500}', '{"x": "status", "status": 1}',
    '{"status": 500, "nested": {"deep": {"status": 1}}}', '{"status": -0}',
    '{"status": 5e2}', '{"status": "5e2"}', '{"status": 499.9999999999999999}',
]


def _pipelines(query: str) -> tuple[Pipeline, Pipeline]:
    gated = compile_log_query(parse_expr(query)).pipeline
    plain = Pipeline([s for s in gated.stages if not isinstance(s, JsonNumberGate)])
    return gated, plain


def _run(pipeline: Pipeline, stream: dict, line: str):
    out = pipeline.for_stream(stream).process(0, line, None)
    if out is None:
        return None
    return out[0], dict(out[1].labels())


@pytest.mark.parametrize("query", [
    '{app="x"} | json | status >= 500',
    '{app="x"} | json | status < 300',
    '{app="x"} | json | status == 500',
    '{app="x"} | json | status != 500',
    '{app="x"} | logfmt | json | status >= 500',
])
@pytest.mark.parametrize("stream", [{"app": "x"}, {"app": "x", "status": "200"}])
def test_gated_answers_equal_the_parser_and_filter(query, stream):
    gated, plain = _pipelines(query)
    assert any(isinstance(s, JsonNumberGate) for s in gated.stages)
    rnd = random.Random(5)
    lines = TRICKY + [json.dumps({"status": rnd.choice([200, 404, 500, 503, "500", "x"]),
                                  "user": {"id": rnd.randint(1, 9)}, "msg": "ok"})
                      for _ in range(200)] + ["status=500 " + t for t in TRICKY[:5]]
    dropped_early = 0
    gate = next(s for s in gated.stages if isinstance(s, JsonNumberGate))
    for line in lines:
        assert _run(gated, stream, line) == _run(plain, stream, line), line
        if gate.process(0, line, plain.for_stream(stream).labels.reset(None)) is None:
            dropped_early += 1
    if "status" not in stream:
        assert dropped_early > 50  # the gate really decided most lines


@pytest.mark.parametrize("query", [
    '{app="x"} | json | status_code >= 500',    # a nested key could make the name
    '{app="x"} | json | status >= 500 and level="error"',
    '{app="x"} | json status="s" | status >= 500',
    '{app="x"} | json | level="x" | status >= 500',
    '{app="x"} | json | status >= 1s',
])
def test_other_shapes_have_no_gate(query):
    gated, _ = _pipelines(query)
    assert not any(isinstance(s, JsonNumberGate) for s in gated.stages)


# -- through the engine: the gate runs alone over a batch's lines before the pipelines ------

T = 1_700_000_000 * 10**9
DEEP = '{"a": ' + "[" * 300 + "]" * 300 + ', "status": 200}'
ENGINE_LINES = TRICKY + [DEEP, '{"a": 1e999, "status": 200}', '{"a": "tab\there", "status": 200}']


@pytest.fixture(scope="module")
def stored(tmp_path_factory, storage_state):
    """The tricky lines and 300 plain ones in a stream without the label, the same in one
    whose lines carry it (or another name) as structured metadata, and in one that has it
    as a stream label."""
    from tests.conftest import engine_reader, matrix_client
    from tests.helpers import JSON_HEADERS, PUSH
    from tests.query.conftest import OLD_DATA

    rnd = random.Random(7)
    lines = ENGINE_LINES + [json.dumps({"status": rnd.choice([200, 404, 500, 503, "502"]),
                                        "user": {"id": rnd.randint(1, 9)}})
                            for _ in range(300)]
    plain = [[str(T + i), line] for i, line in enumerate(lines)]
    with_md = [[str(T + i), line, {"status": "503"} if i % 3 == 0 else {"other": "1"}]
               for i, line in enumerate(lines)]
    streams = [{"stream": {"app": "x", "kind": "plain"}, "values": plain},
               {"stream": {"app": "x", "kind": "metadata"}, "values": with_md},
               {"stream": {"app": "x", "kind": "label", "status": "200"}, "values": plain}]
    with matrix_client(tmp_path_factory.mktemp("gate") / "data", OLD_DATA, storage_state) as c:
        r = c.post(PUSH, content=json.dumps({"streams": streams}), headers=JSON_HEADERS)
        assert r.status_code == 204, r.text
        with engine_reader(c) as make:
            yield make


def _answer(make_reader, query: str, backward: bool, gated: bool, monkeypatch):
    from logql import plan
    from logql.engine.logs import evaluate_log_query
    from logql.engine.results import QueryStats
    from logql.pipeline.stages import StreamPipeline
    from services.read.visibility import VisibleReader

    piped = []
    real = StreamPipeline.process
    monkeypatch.setattr(StreamPipeline, "process",
                        lambda self, *args: piped.append(1) or real(self, *args))
    if not gated:
        monkeypatch.setattr(plan, "_gate_json_numbers", lambda stages: stages)
    plan._compile_cached.cache_clear()
    stats = QueryStats()
    try:
        out = evaluate_log_query(VisibleReader(make_reader()), "fake", parse_expr(query),
                                 T, T + 10**9, limit=5000, backward=backward, stats=stats)
    finally:
        monkeypatch.undo()
        plan._compile_cached.cache_clear()
    return out, stats.post_filter_lines, len(piped)


@pytest.mark.parametrize("query, gated_out", [
    ('{app="x"} | json | status >= 500', 200),
    ('{app="x"} | json | status < 300', 200),
    # a third of these lines have the name as metadata: only the rest can be gated
    ('{app="x", kind="metadata"} | json | status != 503', 20),
    # ... and there the metadata's 503 keeps lines whose own status the gate would drop
    ('{app="x", kind="metadata"} | json | status >= 500', 20),
    # the stream's own label decides every line (200 < 300): none may be gated (-1: none
    # need be gated out)
    ('{app="x", kind="label"} | json | status < 300', -1),
])
@pytest.mark.parametrize("backward", [True, False])
def test_the_engine_answers_as_without_the_gate(stored, monkeypatch, query, gated_out,
                                               backward):
    plain, kept, piped = _answer(stored, query, backward, False, monkeypatch)
    gated, gated_kept, gated_piped = _answer(stored, query, backward, True, monkeypatch)
    # the gate judged most lines before any pipeline saw them
    assert piped - gated_piped > gated_out
    assert gated == plain and gated_kept == kept
    assert plain and sum(len(s["values"]) for s in plain) < 3 * len(ENGINE_LINES) + 900
