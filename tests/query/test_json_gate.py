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
