"""labels, label values and series: parameters, time ranges, selectors, exact JSON."""

from __future__ import annotations

import json

import pytest

from logql.model import canonical_labels
from tests.conftest import module_client
from tests.query.conftest import OLD_DATA
from tests.helpers import JSON_HEADERS, PUSH

BASE = 1_700_000_000 * 10**9  # 2023-11-14T22:13:20Z


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, storage_state):
    with module_client(tmp_path_factory, storage_state, OLD_DATA) as client:
        yield _push_streams(client)


def _push_streams(client):
    streams = [
        ({"app": "api", "env": "prod"}, BASE),
        ({"app": "web", "env": "prod"}, BASE + 60 * 10**9),
        ({"app": "db", "env": "dev", "team": "data"}, BASE + 7200 * 10**9),
    ]
    body = {"streams": [{"stream": labels, "values": [[str(ts), "hello"]]}
                        for labels, ts in streams]}
    assert client.post(PUSH, content=json.dumps(body), headers=JSON_HEADERS).status_code == 204
    return client


WIDE = {"start": str(BASE - 10**9), "end": str(BASE + 3 * 3600 * 10**9)}


def test_labels_in_range(loaded):
    r = loaded.get("/logstore/api/v1/labels", params=WIDE)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {"status": "success", "data": ["app", "env", "service_name", "team"]}
    # only the first two streams have data in the first hour
    first_hour = {"start": str(BASE), "end": str(BASE + 3600 * 10**9)}
    assert loaded.get("/logstore/api/v1/labels", params=first_hour).json()["data"] == [
        "app", "env", "service_name"]
    assert loaded.get("/logstore/api/v1/label", params=first_hour).json()["data"] == [
        "app", "env", "service_name"]


def test_default_range_is_the_last_hour(loaded):
    # the data is from 2023: nothing in the last hour
    assert loaded.get("/logstore/api/v1/labels").json() == {"status": "success", "data": []}


@pytest.mark.parametrize("start, end", [
    ("1700000000", "1700010800"),                              # seconds
    ("1700000000000000000", "1700010800000000000"),            # nanoseconds
    ("1699999999.5", "1700010800.25"),                         # float seconds
    ("2023-11-14T22:13:20Z", "2023-11-15T01:13:20.5Z"),        # RFC 3339
    ("2023-11-15T00:13:20+02:00", "2023-11-15T03:13:20+02:00"),
])
def test_timestamp_formats(loaded, start, end):
    r = loaded.get("/logstore/api/v1/label/app/values", params={"start": start, "end": end})
    assert r.json() == {"status": "success", "data": ["api", "db", "web"]}


def test_since(loaded):
    end = str(BASE + 3 * 3600 * 10**9)
    r = loaded.get("/logstore/api/v1/label/app/values", params={"end": end, "since": "2h"})
    assert r.json()["data"] == ["db"]


def test_label_values_with_query_and_unknown_label(loaded):
    r = loaded.get("/logstore/api/v1/label/app/values",
                   params={**WIDE, "query": '{env="prod"}'})
    assert r.json() == {"status": "success", "data": ["api", "web"]}
    r = loaded.get("/logstore/api/v1/label/nope/values", params=WIDE)
    assert r.json() == {"status": "success", "data": []}
    r = loaded.get("/logstore/api/v1/labels", params={**WIDE, "query": '{app=~"d.*"}'})
    assert r.json()["data"] == ["app", "env", "service_name", "team"]


def test_series_union_and_form_body(loaded):
    r = loaded.get("/logstore/api/v1/series",
                   params=[("match[]", '{app="api"}'), ("match[]", '{team="data"}'),
                           ("match[]", '{app="api"}'), *WIDE.items()])
    assert r.json() == {"status": "success", "data": [
        {"app": "api", "env": "prod", "service_name": "api"},
        {"app": "db", "env": "dev", "service_name": "db", "team": "data"}]}
    r = loaded.post("/logstore/api/v1/series",
                    content=f"match[]={{env!=\"dev\"}}&start={WIDE['start']}&end={WIDE['end']}",
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert [s["app"] for s in r.json()["data"]] == ["api", "web"]


def test_series_matchers_may_match_empty(loaded):
    r = loaded.get("/logstore/api/v1/series", params={**WIDE, "match[]": '{app=~".*"}'})
    assert len(r.json()["data"]) == 3
    r = loaded.get("/logstore/api/v1/series", params={**WIDE, "match[]": '{team=""}'})
    assert [s["app"] for s in r.json()["data"]] == ["api", "web"]
    r = loaded.get("/logstore/api/v1/series", params={**WIDE, "match[]": "{}"})
    assert len(r.json()["data"]) == 3


def test_series_requires_match(loaded):
    r = loaded.get("/logstore/api/v1/series", params=WIDE)
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.startswith("at least one match[] parameter is required")


@pytest.mark.parametrize("path, params, status, text", [
    ("/logstore/api/v1/labels", {"start": "abc"}, 400,
     'could not parse \'start\' parameter: strconv.ParseInt: parsing "abc": invalid syntax'),
    ("/logstore/api/v1/labels", {"end": "noon"}, 400,
     'could not parse \'end\' parameter: strconv.ParseInt: parsing "noon": invalid syntax'),
    ("/logstore/api/v1/labels", {"since": "5x"}, 400,
     'could not parse \'since\' parameter: not a valid duration string: "5x"'),
    ("/logstore/api/v1/labels", {"start": "1700000100", "end": "1700000000"}, 400,
     "end timestamp must not be before or equal to start time"),
    ("/logstore/api/v1/labels", {"query": '{app="a"} |= "x"'}, 400,
     "only label matchers are supported"),
    ("/logstore/api/v1/series", {"match[]": 'app="a"'}, 400, None),
])
def test_bad_parameters(loaded, path, params, status, text):
    r = loaded.get(path, params=params)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("text/plain")
    if text is not None:
        assert r.text == text
    assert r.text and "Traceback" not in r.text


def test_selector_needs_a_non_empty_matcher_for_labels(loaded):
    r = loaded.get("/logstore/api/v1/labels", params={**WIDE, "query": '{app=~".*"}'})
    assert r.status_code == 400
    assert "does not have an empty-compatible value" in r.text


# values that look like the stored text's own punctuation (a stream's identity is
# `{a="1", b="2"}`), with and without characters that need escaping
ODD_VALUES = [{"app": "odd", "a": ", x", "b": "=", "c": "}{", "d": ""},
              {"app": "odd", "a": '", b="1', "e": "tab\there"},
              {"app": "odd", "a": "x=", "b": ", ", "f": "é 😀 {}"}]


def test_series_gives_back_values_with_the_stored_texts_punctuation(make_client):
    client = make_client({"limits_config": {"reject_old_samples": False}})
    body = {"streams": [{"stream": labels, "values": [[str(BASE + i), "hello"]]}
                        for i, labels in enumerate(ODD_VALUES)]}
    assert client.post(PUSH, content=json.dumps(body), headers=JSON_HEADERS).status_code == 204
    r = client.get("/logstore/api/v1/series", params={"match[]": '{app="odd"}', **WIDE})
    assert r.status_code == 200, r.text
    want = [{k: v for k, v in labels.items() if v} | {"service_name": "odd"}
            for labels in ODD_VALUES]
    assert sorted(r.json()["data"], key=lambda s: sorted(s.items())) == \
        sorted(want, key=lambda s: sorted(s.items()))


# label values a text form could misread: quotes, backslashes, control characters, a value
# that starts with `, ` or ends with `=`, non-ASCII, and plain ones around them
ODD_TEXTS = ['plain', 'say "hi"', 'back\\slash', 'line\nbreak\ttab', ', leading', 'ends=',
              '", x="y', 'é\u2028ü', 'nul\x01ctl', '']


def test_series_and_label_values_print_odd_values_exactly(make_client):
    client = make_client({"limits_config": {"reject_old_samples": False}})
    streams = [{"stream": {"job": "odd", "v": value, "w": "z" + value}, "values": [[str(BASE), "x"]]}
               for value in ODD_TEXTS]
    r = client.post(PUSH, content=json.dumps({"streams": streams}), headers=JSON_HEADERS)
    assert r.status_code == 204
    stored = [v for v in ODD_TEXTS if v]  # an empty label value is no label at all
    r = client.get("/logstore/api/v1/label/v/values", params=WIDE)
    assert r.status_code == 200
    assert r.json() == {"status": "success", "data": sorted(stored)}
    r = client.get("/logstore/api/v1/series", params={"match[]": '{job="odd"}', **WIDE})
    assert r.status_code == 200
    expected = [{"job": "odd", "service_name": "odd", **({"v": v} if v else {}), "w": "z" + v}
                for v in ODD_TEXTS]
    expected.sort(key=canonical_labels)  # by their text form, `{job="odd", ...}`
    assert r.json()["data"] == expected
    # the bytes too: keys in name order, UTF-8 as it is, only what JSON must escape escaped
    assert r.content == json.dumps({"status": "success", "data": expected}, ensure_ascii=False,
                                   separators=(",", ":")).encode()
