"""Log queries over real loghub logs, ingested with their own timestamps; every expected
answer is computed here from the structured CSV ground truth (event templates, levels, pids,
content), not from the engine."""

from __future__ import annotations

from collections import Counter

from tests.query.conftest import entries


def _lines(body) -> list[str]:
    return [line for _, _, line in entries(body)]


def _expected(system, keep) -> list[str]:
    return [line for line, row in zip(system.lines, system.rows) if keep(row)]


def test_line_filter_counts_one_template(loaded):
    ssh = loaded.systems["OpenSSH"]
    body = loaded.range_query('{job="openssh"} |= "]: Invalid user "', "OpenSSH")
    assert sorted(_lines(body)) == sorted(_expected(ssh, lambda r: r["EventId"] == "E13"))
    assert len(_lines(body)) == 113


def test_regex_filter_matches_failed_password_templates(loaded):
    ssh = loaded.systems["OpenSSH"]
    # `.+`, not `\S+`: one user name in the sample is " 0101" (two spaces before it)
    body = loaded.range_query('{job="openssh"} |~ "Failed password for (invalid user )?.+ from"',
                              "OpenSSH")
    want = _expected(ssh, lambda r: r["EventId"] in ("E9", "E10", "E14"))
    assert sorted(_lines(body)) == sorted(want)


def test_negative_and_case_insensitive_filters(loaded):
    ssh = loaded.systems["OpenSSH"]
    body = loaded.range_query('{job="openssh"} |= "Failed password" != "invalid user"',
                              "OpenSSH")
    assert sorted(_lines(body)) == sorted(
        _expected(ssh, lambda r: r["EventId"] in ("E9", "E14")))
    body = loaded.range_query('{job="openssh"} |~ "(?i)BREAK-in attempt"', "OpenSSH")
    assert len(_lines(body)) == Counter(r["EventId"] for r in ssh.rows)["E27"]


def test_pattern_filter(loaded):
    ssh = loaded.systems["OpenSSH"]
    body = loaded.range_query('{job="openssh"} |> "<_>: Connection closed by <_> [preauth]"',
                              "OpenSSH")
    assert sorted(_lines(body)) == sorted(_expected(ssh, lambda r: r["EventId"] == "E2"))


def test_regexp_parser_and_level_filter(loaded):
    apache = loaded.systems["Apache"]
    body = loaded.range_query(
        r'{job="apache"} | regexp "^\\[[^\\]]+\\] \\[(?P<level>\\w+)\\]" | level="error"',
        "Apache")
    got = entries(body)
    want = _expected(apache, lambda r: r["Level"] == "error")
    assert len(got) == len(want) == 595
    assert sorted(line for _, _, line in got) == sorted(want)
    assert all(labels["level"] == "error" and labels["job"] == "apache"
               for labels, _, _ in got)


def test_pattern_parser_and_label_filter(loaded):
    ssh = loaded.systems["OpenSSH"]
    body = loaded.range_query(
        '{job="openssh"} | pattern "<_> <_> <_> <host> sshd[<pid>]: <msg>" | pid="24200"',
        "OpenSSH")
    got = entries(body)
    assert len(got) == sum(1 for r in ssh.rows if r["Pid"] == "24200")
    assert {labels["host"] for labels, _, _ in got} == {"LabSZ"}
    # the CSV strips trailing blanks that some raw lines carry
    assert sorted(labels["msg"].rstrip() for labels, _, _ in got) == sorted(
        r["Content"] for r in ssh.rows if r["Pid"] == "24200")


def test_pattern_parser_with_line_format(loaded):
    hdfs = loaded.systems["HDFS"]
    body = loaded.range_query(
        '{job="hdfs"} | pattern "<date> <time> <pid> <level> <component>: <content>" '
        '| level="WARN" | line_format "{{.level}} {{.pid}} {{.content}}"', "HDFS")
    want = [f'{r["Level"]} {r["Pid"]} {r["Content"]}' for r in hdfs.rows if r["Level"] == "WARN"]
    assert sorted(_lines(body)) == sorted(want)
    assert len(want) == 80


def test_json_parser_numeric_filter_and_nested_keys(loaded):
    hdfs = loaded.systems["HDFS"]
    body = loaded.range_query('{job="hdfs-json"} | json | level="INFO" and pid > 1000', "HDFS")
    assert len(entries(body)) == sum(1 for r in hdfs.rows
                                     if r["Level"] == "INFO" and int(r["Pid"]) > 1000)
    body = loaded.range_query('{job="hdfs-json"} | json | event_id="E6"', "HDFS")
    got = entries(body)
    assert len(got) == Counter(r["EventId"] for r in hdfs.rows)["E6"] == 314
    assert all(labels["event_id"] == "E6" for labels, _, _ in got)


def test_json_extraction_and_label_format(loaded):
    hdfs = loaded.systems["HDFS"]
    body = loaded.range_query(
        '{job="hdfs-json"} | json lvl="level", ev="event.id" | lvl="WARN" '
        '| label_format what="{{.ev}}/{{.lvl}}" | line_format "{{.what}}"', "HDFS")
    assert Counter(_lines(body)) == Counter(
        f'{r["EventId"]}/WARN' for r in hdfs.rows if r["Level"] == "WARN")


def test_logfmt_parser_keep_groups_results(loaded):
    hdfs = loaded.systems["HDFS"]
    body = loaded.range_query('{job="hdfs-logfmt"} | logfmt | keep level, event', "HDFS")
    counts = {(s["stream"]["level"], s["stream"]["event"]): len(s["values"])
              for s in body["data"]["result"]}
    assert all(set(s["stream"]) == {"level", "event"} for s in body["data"]["result"])
    assert counts == dict(Counter((r["Level"], r["EventId"]) for r in hdfs.rows))


def test_logfmt_numeric_and_drop(loaded):
    hdfs = loaded.systems["HDFS"]
    body = loaded.range_query(
        '{job="hdfs-logfmt"} | logfmt | pid >= 500 | level != "INFO" | drop msg, pid', "HDFS")
    got = entries(body)
    assert len(got) == sum(1 for r in hdfs.rows if int(r["Pid"]) >= 500 and r["Level"] != "INFO")
    assert all("msg" not in labels and "pid" not in labels for labels, _, _ in got)


def test_case_insensitive_regex_over_raw_lines(loaded):
    hdfs = loaded.systems["HDFS"]
    body = loaded.range_query('{job="hdfs"} |~ "(?i)EXCEPTION"', "HDFS")
    assert sorted(_lines(body)) == sorted(l for l in hdfs.lines if "exception" in l.lower())
    assert _lines(body)


def test_limit_direction_across_streams(loaded):
    hdfs = loaded.systems["HDFS"]
    warn_ts = sorted(t for t, r in zip(hdfs.ts, hdfs.rows) if r["Level"] == "WARN")
    query = '{job=~"hdfs-json|hdfs-logfmt"} |= "WARN"'
    body = loaded.range_query(query, "HDFS", limit="7")
    got = entries(body)
    # both streams hold every WARN event: the newest 7 entries over the two of them
    assert len(got) == 7
    assert sorted(ts for _, ts, _ in got) == sorted((warn_ts * 2))[-7:]
    body = loaded.range_query(query, "HDFS", limit="5", direction="forward")
    assert sorted(ts for _, ts, _ in entries(body)) == sorted(warn_ts * 2)[:5]
    for stream in body["data"]["result"]:
        stamps = [int(t) for t, _ in stream["values"]]
        assert stamps == sorted(stamps)


def test_entries_are_in_direction_order_and_time_range_is_half_open(loaded):
    apache = loaded.systems["Apache"]
    ts_sorted = sorted(apache.ts)
    start, end = ts_sorted[100], ts_sorted[200]
    body = loaded.client.get("/logstore/api/v1/query_range", params={
        "query": '{job="apache"}', "start": str(start), "end": str(end), "limit": "5000"}).json()
    stamps = sorted(ts for _, ts, _ in entries(body))
    assert stamps == ts_sorted[100:200]
    for stream in body["data"]["result"]:
        values = [int(t) for t, _ in stream["values"]]
        assert values == sorted(values, reverse=True)
