"""Every push validation rule: status code, Loki's message, and what was (not) stored."""

from __future__ import annotations

import gzip
import sqlite3
import json
import zlib

import pytest
import snappy

from proto import push_pb2
from tests.helpers import JSON_HEADERS, PUSH, db_path, now_ns, push_body, stored


def test_valid_json_push_is_stored_with_discovered_labels(client):
    ts = now_ns()
    r = client.post(PUSH, content=push_body({"app": "api", "env": "prod"},
                                            [[str(ts), "GET /health 200"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 204
    assert r.content == b""
    assert stored(db_path(client)) == [
        ("fake", '{app="api", env="prod", service_name="api"}', ts, "GET /health 200",
         {"detected_level": "unknown"})]


def test_structured_metadata_names_are_normalised_and_level_detected(client):
    ts = now_ns()
    body = push_body({"job": "x"}, [[str(ts), "POST /login 401",
                                     {"trace.id": "ab", "user-id": "u42", "2fa": "y",
                                      "level": "ERR"}]])
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    [(_, labels, _, _, md)] = stored(db_path(client))
    assert labels == '{job="x", service_name="x"}'
    assert md == {"trace_id": "ab", "user_id": "u42", "key_2fa": "y", "level": "ERR",
                  "detected_level": "error"}


@pytest.mark.parametrize("line, level", [
    ('{"level":"warning","msg":"x"}', "warn"),
    ("ts=1 lvl=dbg msg=hi", "debug"),
    ("2024 [ERROR] disk full", "error"),
    ("nothing to see", "unknown"),
    ("misc:error happened", "unknown"),
    ("critical: fan failed", "critical"),
    # the keyword scan: whole words between its separators, the leftmost one decides
    ("errors were found, then warning(s)", "warn"),
    ("x|fatal|y and info", "fatal"),
    ("debugging [trace]", "trace"),
    ("'err' before INFO", "error"),
    ("information=inform", "unknown"),
])
def test_detected_level_from_line(client, line, level):
    client.post(PUSH, content=push_body({"job": "x"}, [[str(now_ns()), line]]),
                headers=JSON_HEADERS)
    assert stored(db_path(client))[0][4] == {"detected_level": level}


# Lines pushed together in one stream are checked together (LevelDetector.from_lines): each
# must get the level it gets alone. Cases where the first field found decides, its value
# is quoted, empty or kept as sent, the keywords decide, a line holds a newline.
LINES_OF_ONE_STREAM = [
    ("ts=1 level=warn msg=a", "warn"),
    ("ts=2 msg=\"level=error\" level=debug", "debug"),
    ('ts=3 Level="Fatal" lvl=info', "fatal"),
    ("ts=4 level= error here", "error"),
    ('ts=5 level="" info', "info"),
    ("ts=6 LEVEL=Notice", "Notice"),
    ("ts=7 severity=E\tlevel=info", "E"),
    ("critical: ts=8", "critical"),
    ("level=TRACE", "trace"),
    ("lvl=dbg ts=9", "debug"),
    ("plain words", "unknown"),
    ("", "unknown"),
    ("x=1\nlevel=wrn", "warn"),
    ("prefix,log.level=err;x", "err;x"),
    ("sublevel=info", "info"),
    ("ts=10 errors were found, then warning(s)", "warn"),
    ("x|fatal|y and info", "fatal"),
    ("debugging [trace]", "trace"),
    ("=err before INFO", "error"),
]


@pytest.mark.parametrize("extra", [[], [("{\"level\":\"info\"}", "info")],
                                   [("niveau=é level=dbg", "debug")]],
                         ids=["logfmt", "with a JSON line", "with a non-ASCII line"])
def test_detected_level_of_many_lines_in_one_stream(client, extra):
    cases = LINES_OF_ONE_STREAM + extra
    ts = now_ns()
    values = [[str(ts + i), line] for i, (line, _) in enumerate(cases)]
    assert client.post(PUSH, content=push_body({"job": "x"}, values),
                       headers=JSON_HEADERS).status_code == 204
    got = {line: md["detected_level"] for _, _, _, line, md in stored(db_path(client))}
    assert got == dict(cases)


def test_level_label_on_stream_wins(client):
    client.post(PUSH, content=push_body({"job": "x", "level": "WARNING"},
                                        [[str(now_ns()), "error in line"]]),
                headers=JSON_HEADERS)
    assert stored(db_path(client))[0][4] == {"detected_level": "warn"}


def test_discovery_can_be_switched_off(make_client):
    client = make_client({"limits_config": {"discover_service_name": [],
                                            "discover_log_levels": False}})
    ts = now_ns()
    client.post(PUSH, content=push_body({"app": "api"}, [[str(ts), "error"]]),
                headers=JSON_HEADERS)
    assert stored(db_path(client)) == [("fake", '{app="api"}', ts, "error", None)]


def test_empty_label_set_becomes_unknown_service(client):
    r = client.post(PUSH, content=push_body({}, [[str(now_ns()), "x"]]), headers=JSON_HEADERS)
    assert r.status_code == 204
    assert stored(db_path(client))[0][1] == '{service_name="unknown_service"}'


def test_no_labels_without_discovery_is_refused(make_client):
    client = make_client({"limits_config": {"discover_service_name": []}})
    r = client.post(PUSH, content=push_body({"a": ""}, [[str(now_ns()), "x"]]),
                    headers=JSON_HEADERS)
    assert (r.status_code, r.text) == (400, "error at least one label pair is required per "
                                            "stream\n")
    assert stored(db_path(client)) == []


def test_zero_streams_is_422(client):
    r = client.post(PUSH, content=b'{"streams":[]}', headers=JSON_HEADERS)
    assert r.status_code == 422
    assert r.text == "error at least one valid stream is required for ingestion\n"
    assert r.headers["content-type"] == "text/plain; charset=utf-8"


def test_all_streams_empty_is_204(client):
    r = client.post(PUSH, content=b'{"streams":[{"stream":{"a":"b"},"values":[]}]}',
                    headers=JSON_HEADERS)
    assert r.status_code == 204


@pytest.mark.parametrize("body, fragment", [
    (b'{"streams": [', "invalid push request"),
    (b"", "EOF"),
    (b'{"streams":[{"stream":{"a":"b"},"values":[[1700000000000000000,"x"]]}]}',
     "timestamps must be strings of Unix epoch nanoseconds"),
    (b'{"streams":[{"stream":{"a":"b"},"values":[["abc","x"]]}]}',
     'invalid timestamp "abc"'),
    (b'{"streams":[{"stream":{"a":"b"},"values":[["1","x",{"k":1}]]}]}',
     "invalid push request"),
    (b'{"streams":[{"stream":{"a":1},"values":[["1","x"]]}]}', "invalid push request"),
])
def test_unparsable_json_is_400_and_stores_nothing(client, body, fragment):
    good = push_body({"ok": "1"}, [[str(now_ns()), "fine"]])
    # a body that does not parse must not store its valid-looking parts either
    r = client.post(PUSH, content=body, headers=JSON_HEADERS)
    assert r.status_code == 400
    assert fragment in r.text
    assert "Traceback" not in r.text
    assert stored(db_path(client)) == []
    assert client.post(PUSH, content=good, headers=JSON_HEADERS).status_code == 204


def test_invalid_label_name_refuses_that_stream_only(client):
    ts = now_ns()
    body = json.dumps({"streams": [
        {"stream": {"a-b": "x"}, "values": [[str(ts), "bad"]]},
        {"stream": {"good": "y"}, "values": [[str(ts), "kept"]]}]}).encode()
    r = client.post(PUSH, content=body, headers=JSON_HEADERS)
    assert r.status_code == 400
    assert r.text == ("couldn't parse labels: 1:3: parse error: unexpected character inside "
                      "braces: '-'\n")
    assert [row[3] for row in stored(db_path(client))] == ["kept"]


def test_an_invalid_label_name_is_refused_every_time(client):
    """The preparer remembers the label names that passed (a bounded set): never one that
    did not, and nothing changes once the set is full and starts over."""
    from services.ingest.prepare import MAX_NAMES_KEPT

    ts = now_ns()
    bad = json.dumps({"streams": [{"stream": {"a-b": "x"}, "values": [[str(ts), "bad"]]}]})
    many = json.dumps({"streams": [{"stream": {f"n{i}": "v"}, "values": [[str(ts), "ok"]]}
                                   for i in range(MAX_NAMES_KEPT + 10)]})
    for body in (bad, bad, many, bad):
        r = client.post(PUSH, content=body.encode(), headers=JSON_HEADERS)
        if body is many:
            assert r.status_code == 204, r.text
        else:
            assert r.status_code == 400
            assert r.text == ("couldn't parse labels: 1:3: parse error: unexpected character "
                              "inside braces: '-'\n")
    assert {row[3] for row in stored(db_path(client))} == {"ok"}


def test_too_many_label_names(client):
    labels = {f"l{i}": "v" for i in range(16)}
    r = client.post(PUSH, content=push_body(labels, [[str(now_ns()), "x"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert r.text.endswith("has 16 label names; limit 15\n")
    assert r.text.startswith("entry for stream '{l0=\"v\", l1=\"v\"")
    # service_name does not count: 15 own labels plus the discovered one are fine
    labels.pop("l15")
    assert client.post(PUSH, content=push_body(labels, [[str(now_ns()), "x"]]),
                       headers=JSON_HEADERS).status_code == 204


def test_the_same_stream_is_checked_against_each_tenants_limits(make_client, tmp_path):
    """A stream's checked labels are kept for the next push: by the limits that checked
    them, so another tenant's stricter ones still refuse it, and its own still take it."""
    runtime = tmp_path / "runtime.yaml"
    runtime.write_text("overrides:\n  strict:\n    max_label_names_per_series: 2\n"
                       "  plain:\n    discover_service_name: []\n")
    c = make_client({"auth_enabled": True, "runtime_config": {"file": str(runtime)}},
                    data_dir=tmp_path / "d")
    labels = {"app": "api", "env": "prod", "zone": "z1"}

    def push(tenant: str, line: str):
        return c.post(PUSH, content=push_body(labels, [[str(now_ns()), line]]),
                      headers={**JSON_HEADERS, "X-Scope-OrgID": tenant})

    assert push("loose", "first").status_code == 204
    r = push("strict", "second")
    assert (r.status_code, r.text.endswith("has 3 label names; limit 2\n")) == (400, True)
    assert push("plain", "third").status_code == 204
    assert push("loose", "fourth").status_code == 204
    assert sorted((tenant, labels_text, line)
                  for tenant, labels_text, _, line, _ in stored(db_path(c))) == [
        ("loose", '{app="api", env="prod", service_name="api", zone="z1"}', "first"),
        ("loose", '{app="api", env="prod", service_name="api", zone="z1"}', "fourth"),
        ("plain", '{app="api", env="prod", zone="z1"}', "third")]


def test_label_name_and_value_too_long(client):
    long_name = "n" * 1025
    r = client.post(PUSH, content=push_body({long_name: "v"}, [[str(now_ns()), "x"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert r.text.endswith(f"has label name too long: '{long_name}'\n")
    long_value = "v" * 2049
    r = client.post(PUSH, content=push_body({"app": long_value}, [[str(now_ns()), "x"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert r.text.endswith(f"has label value too long: '{long_value}'\n")
    assert stored(db_path(client)) == []


def test_line_too_long_keeps_the_valid_entries(client):
    ts = now_ns()
    big = "x" * (256 * 1024 + 1)
    r = client.post(PUSH, content=push_body({"app": "a"}, [[str(ts), "small"],
                                                           [str(ts + 1), big]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert r.text == ("max entry size '262144' bytes exceeded for stream "
                      "'{app=\"a\", service_name=\"a\"}' while adding an entry with length "
                      "'262145' bytes\n")
    assert [row[3] for row in stored(db_path(client))] == ["small"]


def test_configured_line_size(make_client):
    client = make_client({"limits_config": {"max_line_size": "1KB"}})
    r = client.post(PUSH, content=push_body({"app": "a"}, [[str(now_ns()), "y" * 1025]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert "max entry size '1024' bytes exceeded" in r.text


def test_timestamps_too_new_and_too_old(client):
    now = now_ns()
    future = now + 11 * 60 * 10**9
    old = now - 8 * 86400 * 10**9
    r = client.post(PUSH, content=push_body({"app": "a"}, [[str(future), "f"], [str(old), "o"],
                                                           [str(now), "ok"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    parts = r.text.rstrip("\n").split("; ")
    assert len(parts) == 2
    assert any(p.startswith("1 errors like: entry for stream '{app=\"a\", service_name=\"a\"}' "
                            "has timestamp too new: ") for p in parts)
    assert any("has timestamp too old: " in p and "oldest acceptable timestamp is: " in p
               for p in parts)
    assert [row[3] for row in stored(db_path(client))] == ["ok"]


def test_old_samples_accepted_when_rejection_is_off(make_client):
    client = make_client({"limits_config": {"reject_old_samples": False}})
    r = client.post(PUSH, content=push_body({"app": "a"}, [["1133671664000000000", "2005"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 204
    assert [(ts, line) for _, _, ts, line, _ in stored(db_path(client))] == \
        [(1133671664000000000, "2005")]


def test_repeated_errors_are_counted(client):
    future = now_ns() + 3600 * 10**9
    r = client.post(PUSH, content=push_body({"app": "a"}, [[str(future), "1"],
                                                           [str(future), "2"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert r.text.startswith("2 errors like: entry for stream")


def test_structured_metadata_limits(make_client):
    client = make_client({"limits_config": {"max_structured_metadata_entries_count": 2}})
    ts = str(now_ns())
    r = client.post(PUSH, content=push_body({"app": "a"}, [[ts, "x", {"a": "1", "b": "2",
                                                                      "c": "3"}]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert "has too many structured metadata labels: '3', limit: '2'" in r.text
    r = client.post(PUSH, content=push_body({"app": "a"}, [[ts, "x", {"a": "v" * 70000}]]),
                    headers=JSON_HEADERS)
    assert "has structured metadata too large: '70001' bytes, limit: '65536' bytes" in r.text
    assert stored(db_path(client)) == []


def test_structured_metadata_disallowed(make_client):
    client = make_client({"limits_config": {"allow_structured_metadata": False}})
    r = client.post(PUSH, content=push_body({"app": "a"}, [[str(now_ns()), "x", {"k": "v"}]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 400
    assert "includes structured metadata, but this feature is disallowed" in r.text


def test_exact_duplicates_are_stored_once(client):
    ts = str(now_ns())
    body = push_body({"app": "a"}, [[ts, "same"], [ts, "same"], [ts, "other"]])
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    assert sorted(row[3] for row in stored(db_path(client))) == ["other", "same"]


def test_out_of_order_entries_are_accepted(client):
    ts = now_ns()
    body = push_body({"app": "a"}, [[str(ts), "late"], [str(ts - 3 * 3600 * 10**9), "early"]])
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    assert [row[3] for row in stored(db_path(client))] == ["early", "late"]


def test_content_type_rules(client):
    body = push_body({"app": "a"}, [[str(now_ns()), "x"]])
    r = client.post(PUSH, content=body)
    assert (r.status_code, r.text) == (400, "mime: no media type\n")
    r = client.post(PUSH, content=body, headers={"Content-Type": "text/plain"})
    assert (r.status_code, r.text) == (400, "snappy: corrupt input\n")
    r = client.post(PUSH, content=body, headers={"Content-Type": "application/json",
                                                 "Content-Encoding": "br"})
    assert (r.status_code, r.text) == (400, 'Content-Encoding "br" not supported\n')
    assert stored(db_path(client)) == []


def test_gzip_and_deflate_bodies(client):
    ts = now_ns()
    body = push_body({"app": "a"}, [[str(ts), "zipped"]])
    r = client.post(PUSH, content=gzip.compress(body),
                    headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 204
    comp = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw = comp.compress(push_body({"app": "a"}, [[str(ts + 1), "deflated"]])) + comp.flush()
    r = client.post(PUSH, content=raw, headers={"Content-Type": "application/json",
                                                "Content-Encoding": "deflate"})
    assert r.status_code == 204
    assert [row[3] for row in stored(db_path(client))] == ["zipped", "deflated"]


def test_body_over_the_limit_is_413(make_client):
    client = make_client({"distributor": {"max_recv_msg_size": 1000}})
    body = push_body({"app": "a"}, [[str(now_ns()), "x" * 2000]])
    r = client.post(PUSH, content=body, headers=JSON_HEADERS)
    assert r.status_code == 413
    assert r.text.startswith("request body too large: message size too large than max (")
    assert stored(db_path(client)) == []


def test_decompressed_body_over_the_limit_is_413(make_client):
    client = make_client({"distributor": {"max_decompressed_size": 1000}})
    body = gzip.compress(push_body({"app": "a"}, [[str(now_ns()), "x" * 5000]]))
    r = client.post(PUSH, content=body, headers={"Content-Type": "application/json",
                                                 "Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert "decompressed message size too large than max" in r.text


def _protobuf(labels: str, entries: list[tuple[int, str, dict]]) -> bytes:
    req = push_pb2.PushRequest()
    stream = req.streams.add()
    stream.labels = labels
    for ts, line, md in entries:
        e = stream.entries.add()
        e.timestamp.seconds, e.timestamp.nanos = divmod(ts, 10**9)
        e.line = line
        for k, v in md.items():
            p = e.structuredMetadata.add()
            p.name, p.value = k, v
    return snappy.compress(req.SerializeToString())


def test_protobuf_push_with_structured_metadata(client):
    ts = now_ns()
    body = _protobuf('{env="prod", app="api"}', [(ts, "hello", {"trace_id": "t1"})])
    r = client.post(PUSH, content=body, headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 204
    assert stored(db_path(client)) == [
        ("fake", '{app="api", env="prod", service_name="api"}', ts, "hello",
         {"trace_id": "t1", "detected_level": "unknown"})]


@pytest.mark.parametrize("labels, message", [
    ('{a-b="x"}', "couldn't parse labels: 1:3: parse error: unexpected character inside "
                  "braces: '-'"),
    ('{a="x"', "couldn't parse labels: 1:7: parse error: unexpected end of input inside "
               "braces"),
    ("{a=x}", "couldn't parse labels: 1:4: parse error: unexpected character inside braces: "
              "'x'"),
])
def test_protobuf_bad_labels_refuse_the_request(client, labels, message):
    body = _protobuf(labels, [(now_ns(), "x", {})])
    r = client.post(PUSH, content=body, headers={"Content-Type": "application/x-protobuf"})
    assert (r.status_code, r.text) == (400, message + "\n")
    assert stored(db_path(client)) == []


def test_uncompressed_protobuf_is_refused(client):
    req = push_pb2.PushRequest()
    req.streams.add(labels='{a="b"}').entries.add(line="x")
    r = client.post(PUSH, content=req.SerializeToString(),
                    headers={"Content-Type": "application/x-protobuf"})
    assert (r.status_code, r.text) == (400, "snappy: corrupt input\n")


def test_legacy_push_formats(client):
    from services.ingest.prepare import rfc3339
    ts = now_ns() // 1000 * 1000
    body = json.dumps({"streams": [{"labels": '{app="old"}', "entries": [
        {"ts": rfc3339(ts), "line": "legacy"}]}]}).encode()
    assert client.post("/api/compat/push", content=body, headers=JSON_HEADERS).status_code == 204
    v1 = push_body({"app": "v1"}, [[str(now_ns()), "ignored"]])
    r = client.post("/api/compat/push", content=v1, headers=JSON_HEADERS)
    assert r.status_code == 204  # Loki answers 204 and stores nothing for a v1 body here
    assert [(row[1], row[2], row[3]) for row in stored(db_path(client))] == [
        ('{app="old", service_name="old"}', ts, "legacy")]


def test_duplicates_are_not_counted_twice_by_the_rollups(client):
    ts = now_ns() - 120 * 10**9
    body = push_body({"app": "a"}, [[str(ts), "same"], [str(ts + 1), "other"]])
    for _ in range(2):
        assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    r = client.get("/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({app="a"}[10m]))', "time": str(ts + 5 * 60 * 10**9)})
    assert r.status_code == 200, r.text
    assert [s["value"][1] for s in r.json()["data"]["result"]] == ["2"]
    conn = sqlite3.connect(db_path(client))
    assert conn.execute("SELECT sum(lines), sum(bytes) FROM rollups").fetchone() == (2, 9)
    conn.close()
