"""Parameter validation of query/query_range (texts and order of http-api.md §4.1/§4.2),
format_query, and dispatching of metric queries."""

from __future__ import annotations

import pytest

from tests.conftest import matrix_client, module_client
from tests.query.conftest import QUERY, QUERY_RANGE

FORMAT = "/logstore/api/v1/format_query"
OK = '{app="a"}'


@pytest.fixture(scope="module")
def client(tmp_path_factory, storage_state):
    """One app for the module's tests that store nothing: answers to bad and plain
    parameters, which no earlier request of theirs changes."""
    with module_client(tmp_path_factory, storage_state) as c:
        yield c


def error(client, path=QUERY_RANGE, method="GET", **params) -> tuple[int, str]:
    if method == "GET":
        r = client.get(path, params=params)
    else:
        r = client.post(path, data=params)
    assert r.headers["content-type"] == "text/plain; charset=utf-8", r.text
    return r.status_code, r.text


@pytest.mark.parametrize("params, text", [
    ({"start": "abc"}, 'could not parse \'start\' parameter: strconv.ParseInt: parsing "abc": '
                       "invalid syntax"),
    ({"end": "noon"}, 'could not parse \'end\' parameter: strconv.ParseInt: parsing "noon": '
                      "invalid syntax"),
    ({"since": "5x"}, 'could not parse \'since\' parameter: not a valid duration string: "5x"'),
    ({"start": "20", "end": "10"}, "end timestamp must not be before or equal to start time"),
    ({"limit": "x"}, 'strconv.Atoi: parsing "x": invalid syntax'),
    ({"limit": "0"}, "limit must be a positive value"),
    ({"limit": "-3"}, "limit must be a positive value"),
    ({"direction": "sideways"}, "invalid direction 'sideways'"),
    ({"step": "soon"}, 'cannot parse "soon" to a valid duration'),
    ({"step": "0"}, "zero or negative query resolution step widths are not accepted. "
                    "Try a positive integer"),
    ({"start": "0", "end": "11001", "step": "1"},
     "exceeded maximum resolution of 11,000 points per time series. "
     "Try increasing the value of the step parameter"),
    ({"interval": "often"}, 'cannot parse "often" to a valid duration'),
    ({"interval": "-1"}, "interval must be >= 0"),
    ({"query": '{app="a"'}, "parse error at line 1, col 9: syntax error: unexpected $end, "
                            "expecting } or ,"),
    ({"query": ""}, "parse error : syntax error: unexpected $end"),  # Loki: no position
    ({"limit": "5001"}, "max entries limit per query exceeded, limit > "
                        "max_entries_limit_per_query (5001 > 5000)"),
    ({"start": "1000000000", "end": "1002700000"},
     "the query time range exceeds the limit (query length: 750h0m0s, limit: 30d1h)"),
])
def test_query_range_errors(client, params, text):
    params = {"query": OK, **params}
    assert error(client, **params) == (400, text)
    assert error(client, method="POST", **params) == (400, text)


def test_validation_order(client):
    # every parameter is bad: the first in Loki's order is reported
    bad = {"query": "{", "start": "x", "limit": "y", "direction": "z", "interval": "w"}
    assert error(client, **bad)[1].startswith("could not parse 'start' parameter")
    bad.pop("start")
    assert error(client, **bad)[1] == 'strconv.Atoi: parsing "y": invalid syntax'
    bad.pop("limit")
    assert error(client, **bad)[1] == "invalid direction 'z'"
    bad.pop("direction")
    assert error(client, **bad)[1] == 'cannot parse "w" to a valid duration'
    bad.pop("interval")
    assert error(client, **bad)[1].startswith("parse error at line 1, col 2")


def test_max_entries_applies_to_log_queries_only_and_follows_config(make_client):
    c = make_client({"limits_config": {"max_entries_limit_per_query": 10}})
    assert error(c, query=OK, limit="11") == (
        400, "max entries limit per query exceeded, limit > max_entries_limit_per_query "
             "(11 > 10)")
    assert c.get(QUERY_RANGE, params={"query": OK, "limit": "10"}).status_code == 200


def test_pipeline_build_error_is_400(client):
    status, text = error(client, query='{app="a"} | line_format "{{.a"')
    assert status == 400 and text


def test_instant_query_errors(client):
    assert error(client, QUERY, query=OK, time="noon") == (
        400, 'strconv.ParseInt: parsing "noon": invalid syntax')
    assert error(client, QUERY, query=OK, limit="0") == (400, "limit must be a positive value")
    assert error(client, QUERY, query=OK, direction="up") == (400, "invalid direction 'up'")
    assert error(client, QUERY, query=OK, limit="6000") == (
        400, "max entries limit per query exceeded, limit > max_entries_limit_per_query "
             "(6000 > 5000)")


def test_equal_start_and_end_is_allowed(client):
    r = client.get(QUERY_RANGE, params={"query": OK, "start": "10", "end": "10"})
    assert r.status_code == 200
    assert r.json()["data"]["result"] == []


def test_auth_enabled_requires_org_id(make_client):
    c = make_client({"auth_enabled": True})
    r = c.get(QUERY_RANGE, params={"query": OK})
    assert (r.status_code, r.text) == (401, "no org id")


def test_tenants_do_not_see_each_other(make_client):
    from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body

    c = make_client({"auth_enabled": True})
    r = c.post(PUSH, content=push_body({"app": "a"}, [[str(now_ns()), "secret"]]),
               headers={**JSON_HEADERS, "X-Scope-OrgID": "t1"})
    assert r.status_code == 204
    for tenant, n in (("t1", 1), ("t2", 0)):
        r = c.get(QUERY_RANGE, params={"query": OK}, headers={"X-Scope-OrgID": tenant})
        assert sum(len(s["values"]) for s in r.json()["data"]["result"]) == n
        # an instant log query
        r = c.get(QUERY, params={"query": OK}, headers={"X-Scope-OrgID": tenant})
        assert sum(len(s["values"]) for s in r.json()["data"]["result"]) == n
        # metric queries answered from the rollups (range and instant), and by a scan
        for query in ('sum(count_over_time({app="a"}[5m]))',
                      'sum by (app) (count_over_time({app="a"}[5m]))',
                      'sum(count_over_time({app="a"} |= "secret" [5m]))'):
            r = c.get(QUERY_RANGE, params={"query": query, "step": "60"},
                      headers={"X-Scope-OrgID": tenant})
            assert r.status_code == 200, r.text
            counted = [v for s in r.json()["data"]["result"] for _, v in s["values"]]
            assert (max(map(float, counted)) if counted else 0) == n, (query, tenant)
            r = c.get(QUERY, params={"query": query}, headers={"X-Scope-OrgID": tenant})
            counted = [s["value"][1] for s in r.json()["data"]["result"]]
            assert (max(map(float, counted)) if counted else 0) == n, (query, tenant)


def test_format_query(client):
    r = client.get(FORMAT, params={"query": 'sum by (level) (rate({app="foo"}[5m]))'})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json; charset=UTF-8"
    assert r.text == '{"status":"success","data":"sum by (level)(rate({app=\\"foo\\"}[5m]))"}'
    r = client.post(FORMAT, data={"query": '{app="foo"} |= "x" | logfmt'})
    assert r.json() == {"status": "success", "data": '{app="foo"} |= "x" | logfmt'}


def test_format_query_error_is_json(client):
    r = client.get(FORMAT, params={"query": '{app="foo"'})
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    assert r.text == ('{"status":"invalid-query","error":"parse error at line 1, col 11: '
                      'syntax error: unexpected $end, expecting } or ,"}\n')


def test_metric_query_goes_to_the_metric_engine(client):
    r = client.get(QUERY_RANGE, params={"query": 'count_over_time({app="a"}[1m])',
                                        "start": "1700000000", "end": "1700000060"})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["resultType"] == "matrix" and "stats" in data
    r = client.get(QUERY, params={"query": "1 + 1", "time": "1700000000"})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["resultType"] == "scalar"
    assert r.json()["data"]["result"] == [1700000000, "2"]


TIMEOUT = (504, "request timed out, decrease the duration of the request or add more label "
                "matchers (prefer exact match over regex match) to reduce the amount of data "
                "processed")


@pytest.mark.parametrize("query", [
    OK,                                                         # log query
    'count_over_time({app="a"}[1m])',                           # metric, from rollups
    'sum by (app) (count_over_time({app="a"}[1m]))',            # summed rollups
    'count_over_time({app="a"} |= "x" [1m])',                   # metric, scanning lines
    'quantile_over_time(0.5, {app="a"} | logfmt | unwrap v [1m]) by (app)',
    'sum(rate({app="a"}[1m])) / sum(rate({app="a"} |= "x" [1m]))',
])
@pytest.mark.parametrize("path", [QUERY_RANGE, "/logstore/api/v1/query"])
def test_query_timeout_is_504_for_every_kind_of_query(late_and_default, query, path):
    late, default = late_and_default
    r = late.get(path, params={"query": query})
    assert (r.status_code, r.text) == TIMEOUT
    # the same queries answer with the default timeout
    assert default.get(path, params={"query": query}).status_code == 200


@pytest.fixture(scope="module")
def late_and_default(tmp_path_factory, storage_state):
    """An app whose every stage is late (`query_timeout: 1ns`) holding one line, and one
    with the default timeout over the same data directory; only read after the push."""
    from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body

    data = tmp_path_factory.mktemp("timeouts") / "data"
    with matrix_client(data, {"limits_config": {"query_timeout": "1ns"}}, storage_state) as late:
        r = late.post(PUSH, content=push_body({"app": "a"}, [[str(now_ns() - 10**9), "x v=1"]]),
                      headers=JSON_HEADERS)
        assert r.status_code == 204
        with matrix_client(data, {}, storage_state) as default:
            yield late, default
