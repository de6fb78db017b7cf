"""Template functions cannot be asked for gigabytes (issue 15): printf widths past Go's 1e6
read as Go reads them, `repeat` past 16 MiB is a template error on that line."""

from __future__ import annotations

import json
import time

from tests.helpers import JSON_HEADERS, PUSH

NOW = time.time_ns()


def run(client, pipeline: str) -> list:
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="t"} ' + pipeline, "start": str(NOW - 10**9), "end": str(NOW + 10**9)})
    assert r.status_code == 200, r.text
    return [(s["stream"].get("__error__"), v[1]) for s in r.json()["data"]["result"]
            for v in s["values"]]


def test_huge_printf_width_and_repeat(client):
    body = json.dumps({"streams": [{"stream": {"app": "t"}, "values": [[str(NOW), "x"]]}]})
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    assert run(client, '| line_format "{{ printf \\"%0999999999d\\" 1 }}"') == [
        (None, "%!(NOVERB)%!(EXTRA int=1)")]
    assert run(client, '| line_format "{{ printf \\"%05d\\" 1 }}"') == [(None, "00001")]
    (err, line), = run(client, '| line_format "{{ repeat 1000000000 \\"x\\" }}"')
    assert err == "TemplateFormatErr" and line == "x"


def test_a_log_result_stops_at_64_mib_of_lines(client):
    body = json.dumps({"streams": [{"stream": {"app": "t"}, "values": [
        [str(NOW + i), "x"] for i in range(10)]}]})
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="t"} | line_format "{{ repeat 15000000 \\"y\\" }}"', "limit": "10",
        "start": str(NOW - 10**9), "end": str(NOW + 10**9)})
    assert (r.status_code, r.text) == (400, (
        "the query result is larger than 64 MiB of log lines; lower the limit or filter the "
        "lines"))
    # four such lines (57 MiB) are a result
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="t"} | line_format "{{ repeat 15000000 \\"y\\" }}"', "limit": "4",
        "start": str(NOW - 10**9), "end": str(NOW + 10**9)})
    assert r.status_code == 200 and len(r.json()["data"]["result"][0]["values"]) == 4
