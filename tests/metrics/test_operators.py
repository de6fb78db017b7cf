"""Vector aggregations, binary operators, label_replace, vector() and literals, with exact
expected values on a tiny data set, and golden JSON for instant and range responses."""

from __future__ import annotations

import pytest

from metrics_helpers import NS, Row, query_instant, query_range, vector

T0 = 1_699_999_200 * NS
MIN = 60 * NS
AT = T0 + 10 * MIN
COUNTS = {("a", "prod"): 3, ("b", "prod"): 5, ("c", "dev"): 5, ("d", "dev"): 1}
C = 'count_over_time({env=~".+"}[5m])'


def _rows() -> list[Row]:
    rows = []
    for (app, env), n in COUNTS.items():
        for i in range(n):
            rows.append(Row({"app": app, "env": env}, AT - i * 20 * NS, f"line {i}"))
    # outside every window used below
    rows.append(Row({"app": "a", "env": "prod"}, AT - 30 * MIN, "old"))
    return rows


@pytest.fixture(scope="module")
def loaded(module_client):
    return module_client(_rows())


def L(**kw) -> tuple:
    return tuple(sorted(kw.items()))


def ask(client, q: str) -> dict:
    return vector(query_instant(client, q, AT))


def result(client, q: str, t: int = AT) -> list:
    resp = query_instant(client, q, t)
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]["result"]


@pytest.mark.parametrize("q,want", [
    (f"sum by (env) ({C})", {L(env="prod"): 8, L(env="dev"): 6}),
    (f"sum({C}) by (env)", {L(env="prod"): 8, L(env="dev"): 6}),
    (f"sum({C})", {(): 14}),
    (f"avg by (env) ({C})", {L(env="prod"): 4, L(env="dev"): 3}),
    (f"min by (env) ({C})", {L(env="prod"): 3, L(env="dev"): 1}),
    (f"max without (app) ({C})", {L(env="prod"): 5, L(env="dev"): 5}),
    (f"count by (env) ({C})", {L(env="prod"): 2, L(env="dev"): 2}),
    (f"stdvar by (env) ({C})", {L(env="prod"): 1, L(env="dev"): 4}),
    (f"stddev by (env) ({C})", {L(env="prod"): 1, L(env="dev"): 2}),
    (f"sum without (app, env) ({C})", {(): 14}),
    (f"topk(1, {C})", {L(app="b", env="prod"): 5}),          # tie with c: first by labels
    (f"topk(2, {C})", {L(app="b", env="prod"): 5, L(app="c", env="dev"): 5}),
    (f"bottomk(1, {C})", {L(app="d", env="dev"): 1}),
    (f"topk by (env) (1, {C})", {L(app="b", env="prod"): 5, L(app="c", env="dev"): 5}),
    (f"bottomk(2, {C}) by (env)", {L(app="a", env="prod"): 3, L(app="b", env="prod"): 5,
                                  L(app="c", env="dev"): 5, L(app="d", env="dev"): 1}),
    (f"{C} > 3", {L(app="b", env="prod"): 5, L(app="c", env="dev"): 5}),
    (f"3 < {C}", {L(app="b", env="prod"): 5, L(app="c", env="dev"): 5}),
    (f"{C} >= bool 3", {L(app="a", env="prod"): 1, L(app="b", env="prod"): 1,
                        L(app="c", env="dev"): 1, L(app="d", env="dev"): 0}),
    (f"{C} * 2 - 1", {L(app="a", env="prod"): 5, L(app="b", env="prod"): 9,
                      L(app="c", env="dev"): 9, L(app="d", env="dev"): 1}),
    (f"2 ^ {C} % 7", {L(app="a", env="prod"): 1, L(app="b", env="prod"): 4,
                      L(app="c", env="dev"): 4, L(app="d", env="dev"): 2}),
    (f"{C} / on (env) group_left sum by (env) ({C})",
     {L(app="a", env="prod"): 3 / 8, L(app="b", env="prod"): 5 / 8,
      L(app="c", env="dev"): 5 / 6, L(app="d", env="dev"): 1 / 6}),
    (f"sum by (env) ({C}) / on (env) group_right {C}",
     {L(app="a", env="prod"): 8 / 3, L(app="b", env="prod"): 8 / 5,
      L(app="c", env="dev"): 6 / 5, L(app="d", env="dev"): 6}),
    (f"{C} - on (env) group_left (team) label_replace(sum by (env) ({C}), "
     f'"team", "t-$1", "env", "(.*)")',
     {L(app="a", env="prod", team="t-prod"): -5, L(app="b", env="prod", team="t-prod"): -3,
      L(app="c", env="dev", team="t-dev"): -1, L(app="d", env="dev", team="t-dev"): -5}),
    (f"sum by (env) ({C}) == on (env) max by (env) ({C}) * 2", {}),
    (f"sum by (env) ({C}) > bool ignoring () max by (env) ({C})",
     {L(env="prod"): 1, L(env="dev"): 1}),
    ('count_over_time({app=~"a|b"}[5m]) and count_over_time({app=~"b|c"}[5m])',
     {L(app="b", env="prod"): 5}),
    ('count_over_time({app=~"a|b"}[5m]) or count_over_time({app=~"b|c"}[5m])',
     {L(app="a", env="prod"): 3, L(app="b", env="prod"): 5, L(app="c", env="dev"): 5}),
    ('count_over_time({app=~"a|b"}[5m]) unless count_over_time({app=~"b|c"}[5m])',
     {L(app="a", env="prod"): 3}),
    ('count_over_time({app="a"}[5m]) and on (env) count_over_time({app="b"}[5m])',
     {L(app="a", env="prod"): 3}),
    ('count_over_time({app="zz"}[5m]) or vector(0)', {(): 0}),
    ("vector(2) * 3", {(): 6}),
    ('label_replace(count_over_time({app="a"}[5m]), "x", "$1-${1}y$$", "app", "(.*)")',
     {L(app="a", env="prod", x="a-ay$"): 3}),
    ('label_replace(count_over_time({app="a"}[5m]), "app", "", "env", "prod")',
     {L(env="prod"): 3}),
    ('label_replace(count_over_time({app="a"}[5m]), "x", "y", "app", "b")',
     {L(app="a", env="prod"): 3}),
])
def test_operator_values(loaded, q, want):
    got = ask(loaded, q)
    assert got == pytest.approx(want)


def test_division_by_zero_is_nan(loaded):
    got = result(loaded, 'count_over_time({app="a"}[5m]) / 0')
    assert got[0]["value"][1] == "NaN"
    assert result(loaded, 'count_over_time({app="a"}[5m]) % 0')[0]["value"][1] == "NaN"
    # 3 ^ -1000 underflows to 0, so this is -1 / 0 as well
    assert result(loaded, '-1 / count_over_time({app="a"}[5m]) ^ -1000')[0]["value"][1] == "NaN"
    assert result(loaded, 'count_over_time({app="a"}[5m]) ^ 1000')[0]["value"][1] == "+Inf"
    assert result(loaded, '-1 * count_over_time({app="a"}[5m]) ^ 1000')[0]["value"][1] == "-Inf"


@pytest.mark.parametrize("q,msg", [
    (f"{C} / on (env) sum by (env) ({C})",
     "multiple matches for labels: many-to-one matching must be explicit "
     "(group_left/group_right)"),
    (f"sum by (env) ({C}) / on (env) {C}",
     "found duplicate series on the right hand-side;many-to-many matching not allowed: "
     "matching labels must be unique on one side"),
    (f"{C} / on (env) group_right sum by (env) ({C})",
     "found duplicate series on the left hand-side;many-to-many matching not allowed: "
     "matching labels must be unique on one side"),
    (f"{C} / on (env) group_left (app) label_replace(sum by (env) ({C}), \"app\", \"z\", "
     f"\"env\", \".*\")",
     "multiple matches for labels: grouping labels must ensure unique matches"),
])
def test_matching_errors(loaded, q, msg):
    resp = query_instant(loaded, q, AT)
    assert resp.status_code == 400
    assert resp.text == msg


def test_sort_keeps_order_in_instant_results(loaded):
    desc = [r["metric"]["app"] for r in result(loaded, f"sort_desc({C})")]
    assert desc == ["b", "c", "a", "d"]
    asc = [r["metric"]["app"] for r in result(loaded, f"sort({C})")]
    assert asc == ["d", "a", "b", "c"]
    plain = [r["metric"]["app"] for r in result(loaded, f"topk(4, {C})")]
    assert plain == ["a", "b", "c", "d"]        # no sort: ordered by labels


def test_series_limit(module_client):
    rows = [Row({"app": f"s{i:03d}"}, AT - NS, "x") for i in range(6)]
    client = module_client(rows, {"limits_config": {
        "reject_old_samples": False, "discover_log_levels": False,
        "discover_service_name": [], "max_query_series": 5}})
    resp = query_instant(client, 'count_over_time({app=~"s.*"}[5m])', AT)
    assert resp.status_code == 400
    assert resp.text.startswith("maximum number of series (5) reached for a single query;")
    assert query_instant(client, 'sum(count_over_time({app=~"s.*"}[5m]))', AT).status_code \
        == 200


# ----------------------------------------------------------------------------- golden JSON

def _data(resp) -> dict:
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "success" and list(body["data"])[:2] == ["resultType", "result"]
    assert "summary" in body["data"]["stats"]
    return {k: v for k, v in body["data"].items() if k != "stats"}


def test_golden_instant_vector(loaded):
    resp = query_instant(loaded, f"sum by (env) ({C})", AT + 123_000_000)
    assert _data(resp) == {"resultType": "vector", "result": [
        {"metric": {"env": "dev"}, "value": [1699999800.123, "6"]},
        {"metric": {"env": "prod"}, "value": [1699999800.123, "8"]},
    ]}


def test_golden_instant_topk_ties(loaded):
    assert _data(query_instant(loaded, f"topk(1, {C})", AT)) == {
        "resultType": "vector", "result": [
            {"metric": {"app": "b", "env": "prod"}, "value": [1699999800, "5"]}]}


def test_golden_empty_results(loaded):
    q = 'count_over_time({app="nothing"}[5m])'
    assert _data(query_instant(loaded, q, AT)) == {"resultType": "vector", "result": []}
    assert _data(query_range(loaded, q, AT - 2 * MIN, AT, 60)) == {
        "resultType": "matrix", "result": []}


def test_golden_range_matrix_and_absent(loaded):
    resp = query_range(loaded, 'sum(count_over_time({app="b"}[1m]))', AT - 2 * MIN, AT, 60)
    assert _data(resp) == {"resultType": "matrix", "result": [
        {"metric": {}, "values": [[1699999740, "2"], [1699999800, "3"]]}]}
    resp = query_range(loaded, 'absent_over_time({app="b", env=~"p.*"}[1m])', AT - 2 * MIN,
                       AT + MIN, 60)
    assert _data(resp) == {"resultType": "matrix", "result": [
        {"metric": {"app": "b"}, "values": [[1699999680, "1"], [1699999860, "1"]]}]}
    resp = query_range(loaded, 'rate({app="b"}[1m])', AT - MIN, AT, 30)
    assert _data(resp) == {"resultType": "matrix", "result": [
        {"metric": {"app": "b", "env": "prod"},
         "values": [[1699999740, "0.03333333333333333"], [1699999770, "0.05"],
                    [1699999800, "0.05"]]}]}


def test_golden_scalar_and_literal_range(loaded):
    assert _data(query_instant(loaded, "1 + 1", AT)) == {
        "resultType": "scalar", "result": [1699999800, "2"]}
    assert _data(query_range(loaded, "2 * 3", AT - MIN, AT, 30)) == {
        "resultType": "matrix", "result": [{"metric": {}, "values": [
            [1699999740, "6"], [1699999770, "6"], [1699999800, "6"]]}]}
    assert _data(query_instant(loaded, "vector(1)", AT)) == {
        "resultType": "vector", "result": [{"metric": {}, "value": [1699999800, "1"]}]}
