"""/metrics as loki-mixin reads it: Loki's route names, Loki's families, logstore's own version
in logstore_build_info, no `*_created` series (docs/metrics.md)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from tests.helpers import JSON_HEADERS, now_ns, push_body

ROOT = Path(__file__).resolve().parents[2]


def series(text: str, family: str) -> dict[str, float]:
    """`{labels}` -> value for every sample of one family in a text scrape."""
    return {labels: float(value) for labels, value in
            re.findall(rf"^{family}(\{{[^}}]*\}}) (\S+)$", text, re.M)}


def push(client, path: str, stream: dict, lines: list[str], tenant: str | None = None):
    headers = {**JSON_HEADERS, **({"X-Scope-OrgID": tenant} if tenant else {})}
    values = [[str(now_ns() + i), line] for i, line in enumerate(lines)]
    return client.post(path, content=push_body(stream, values), headers=headers)


def test_route_is_lokis_route_name_whichever_path_spelling(client):
    assert push(client, "/loki/api/v1/push", {"app": "a"}, ["x"]).status_code == 204
    assert push(client, "/logstore/api/v1/push", {"app": "a"}, ["y"]).status_code == 204
    for prefix in ("/loki", "/logstore"):
        assert client.get(f"{prefix}/api/v1/label/app/values").status_code == 200
    assert client.get("/loki/api/v1/rules/team-a/checkout").status_code == 404
    for path in ("/no/such/path", "/wp-login.php"):
        assert client.get(path).status_code == 404
    assert client.delete("/ready").status_code == 405
    assert client.request("BREW", "/ready").status_code == 405
    text = client.get("/metrics").text
    assert series(text, "loki_request_duration_seconds_count") == {
        '{method="POST",route="loki_api_v1_push",status_code="204",ws="false"}': 2.0,
        '{method="GET",route="loki_api_v1_label_name_values",status_code="200",ws="false"}':
            2.0,
        '{method="GET",route="loki_api_v1_rules_namespace_groupname",status_code="404",'
        'ws="false"}': 1.0,
        '{method="GET",route="other",status_code="404",ws="false"}': 2.0,
        '{method="DELETE",route="other",status_code="405",ws="false"}': 1.0,
        '{method="other",route="other",status_code="405",ws="false"}': 1.0,
    }
    ours = series(text, "logstore_request_duration_seconds_count")
    assert ours['{method="POST",route="loki_api_v1_push",status_code="204"}'] == 2.0
    assert ours['{method="GET",route="other",status_code="404"}'] == 2.0
    assert not [labels for labels in ours if "/" in labels]   # no raw path is a label value


def test_build_info_says_logstores_version_and_lokis(client):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    info = client.get("/loki/api/v1/status/buildinfo").json()
    text = client.get("/metrics").text
    [(ours, one)] = series(text, "logstore_build_info").items()
    assert one == 1.0
    assert dict(re.findall(r'(\w+)="([^"]*)"', ours))["version"] == version
    [(loki, one)] = series(text, "loki_build_info").items()
    assert one == 1.0
    assert dict(re.findall(r'(\w+)="([^"]*)"', loki)) == {
        "version": info["version"], "revision": info["revision"], "branch": info["branch"],
        "goversion": info["goVersion"]}
    assert info["version"] != version   # the Loki API level, which Grafana reads


def test_lokis_families_count_pushed_and_discarded_lines(make_client):
    client = make_client({"auth_enabled": True,
                          "limits_config": {"max_global_streams_per_user": 1}})
    assert push(client, "/loki/api/v1/push", {"app": "a"}, ["abc", "de"], "t1").status_code \
        == 204
    # a second stream is over the tenant's one-stream limit: Loki's reason `stream_limit`
    assert push(client, "/loki/api/v1/push", {"app": "b"}, ["1234", "5", "6"], "t1") \
        .status_code == 429
    assert push(client, "/loki/api/v1/push", {"app": "c"}, ["z"], "t2").status_code == 204
    # validation refusals count too, under Loki's reasons: a day ahead is too far in the future
    day_ahead = push_body({"app": "c"}, [[str(now_ns() + 86_400 * 10**9), "later"]])
    r = client.post("/loki/api/v1/push", content=day_ahead,
                    headers={**JSON_HEADERS, "X-Scope-OrgID": "t2"})
    assert r.status_code == 400
    assert "has timestamp too new" in r.text
    text = client.get("/metrics").text
    received = {'{tenant="t1"}': 2.0, '{tenant="t2"}': 1.0}
    assert series(text, "loki_distributor_lines_received_total") == received
    assert series(text, "loki_distributor_bytes_received_total") == \
        {'{tenant="t1"}': 5.0, '{tenant="t2"}': 1.0}
    assert series(text, "loki_discarded_samples_total") == \
        {'{reason="stream_limit",tenant="t1"}': 3.0,
         '{reason="too_far_in_future",tenant="t2"}': 1.0}
    assert series(text, "loki_discarded_bytes_total") == \
        {'{reason="stream_limit",tenant="t1"}': 6.0,
         '{reason="too_far_in_future",tenant="t2"}': 5.0}
    assert series(text, "loki_ingester_memory_streams") == \
        {'{tenant="t1"}': 1.0, '{tenant="t2"}': 1.0}
    # logstore's names read the same numbers
    assert series(text, "logstore_distributor_lines_received_total") == received
    assert series(text, "logstore_discarded_samples_total") == \
        series(text, "loki_discarded_samples_total")


def test_no_created_series_in_either_format(client):
    assert push(client, "/loki/api/v1/push", {"app": "a"}, ["x"]).status_code == 204
    plain = client.get("/metrics").text
    open_metrics = client.get("/metrics", headers={
        "Accept": "application/openmetrics-text; version=1.0.0"}).text
    assert "loki_distributor_lines_received_total" in plain
    assert "loki_distributor_lines_received_total" in open_metrics
    assert "_created" not in plain
    assert "_created" not in open_metrics


def test_validation_refusals_are_discarded_samples_with_lokis_reasons(make_client):
    client = make_client({"limits_config": {"max_line_size": 8,
                                            "max_label_names_per_series": 2}})
    ts = str(now_ns())
    body = json.dumps({"streams": [
        {"stream": {"app": "a"}, "values": [[ts, "fits"], [ts, "twelve bytes"]]},
        {"stream": {"app": "b", "env": "c", "pod": "d"}, "values": [[ts, "x"], [ts, "yy"]]},
        {"stream": {"1bad": "e"}, "values": [[ts, "zzz"]]},
    ]})
    r = client.post("/loki/api/v1/push", content=body, headers=JSON_HEADERS)
    assert r.status_code == 400
    text = client.get("/metrics").text
    assert series(text, "loki_distributor_lines_received_total") == {'{tenant="fake"}': 1.0}
    assert series(text, "loki_discarded_samples_total") == {
        '{reason="invalid_labels",tenant="fake"}': 1.0,
        '{reason="line_too_long",tenant="fake"}': 1.0,
        '{reason="max_label_names_per_series",tenant="fake"}': 2.0}
    assert series(text, "loki_discarded_bytes_total") == {
        '{reason="invalid_labels",tenant="fake"}': 3.0,
        '{reason="line_too_long",tenant="fake"}': 12.0,
        '{reason="max_label_names_per_series",tenant="fake"}': 3.0}
