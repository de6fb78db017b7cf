"""The C loops of a push's validation (services/ingest/_linescan.c) answer as the Python code
they stand in for: the detected level of each line (LevelDetector.from_line) and the content
hashes and UTF-8 sizes (entry_hashes). The push tests run the C loops where they are built;
these hold both to one answer, on real lines and on generated ones."""

from __future__ import annotations

import json
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config import LimitsConfig
from logql.model import MINUTE_NS, TS_MAX, TS_MIN
from services.ingest import decode as decode_module
from services.ingest import levels as levels_module
from services.ingest import prepare as prepare_module
from services.ingest.levels import LevelDetector, linescan
from services.ingest.prepare import Preparer, RawStream, entry_hashes
from storage.entries import tally
from tests.conftest import LOGHUB, loghub_lines, needs

pytestmark = needs(linescan is not None, "services/ingest/_linescan.c not built")

FIELDS = LimitsConfig().log_level_fields
DETECTOR = LevelDetector(FIELDS)

# pieces a line is made of, so that the separators, the field names and the keywords meet in
# every order: what the two scans must agree on
PIECES = st.sampled_from([
    " ", "\t", "\n", "\x0b", "\x1c", "\r", ",", ";", "=", '"', "'", "{", "}", "[", "]", "(",
    ")", ":", "!", "|", "x", "Z", "1", "level", "LEVEL", "Level", "log.level", "lvl", "Lvl",
    "severity", "SeverityText", "severity_text", "sub", "error", "err", "ERR", "errors",
    "warn", "Warning", "info", "information", "inf", "debug", "dbg", "trace", "fatal",
    "critical", "notice", "é",
])
LINES = st.lists(PIECES, max_size=14).map("".join)


def python_levels(lines: list[str]) -> list[str]:
    return [DETECTOR.from_line(line) for line in lines]


def c_levels(lines: list[str]) -> list[str | None]:
    """The C scan alone: None where it leaves a line to the Python code."""
    return linescan.levels(lines, DETECTOR._native, levels_module._NORMALISED,
                           levels_module._LEFT, levels_module._RIGHT,
                           levels_module._KEYWORD_WORDS, levels_module._KEYWORD_LEVELS,
                           "unknown", DETECTOR._native_fields)


def json_shaped(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("{") and stripped.endswith("}")


def test_the_c_scan_is_the_one_the_detector_uses():
    assert DETECTOR._native is not None
    assert c_levels(["ts=1 level=warn", "2024 [ERROR] x", "é level=info", '{"level":"x"}',
                     '{"level":"\\u0078"}']) == ["warn", "error", None, "x", None]


# where the two could part: Python's `\s` and strip() take \x1c-\x1f, a value's quote left
# open, a field name inside a longer word, a keyword at the end, a JSON object in spaces
EDGES = [
    "x\x1clevel=notice", "level=notice\x1dx", "\x1f{\"level\":\"x\"}\x0b", 'level="notice x',
    'level="" warn', "x_level=notice", "sublevel=notice", "level=", "lvl=\"a b\" c",
    "an error", "error", "errors", "[err]", "INFO", "level=INFORMATION", "level=Notice",
    "severity_text=E level=info", "log.level=wrn", "a\nlevel=trace", "{not json", "",
    # JSON objects: what msgspec reads, or leaves to the keyword scan
    '{"level":"warn","level":"info"}', '{"a":{"level":"x"},"level":""}', '{"lvl":"dbg","level":"warn"}',
    '{"a":1e400,"level":"x"}', '{"level":"\\u0077arn"}', ' {"Level" : "Error"}\x1c', '{"level":"x"} }',
    '{"a":[1,2,],"level":"x"}', '{"a":{"b":{"level":"x"}}} error', '{"level":5,"x":{"lvl":"info"}}',
    '{"level":"w\\"x"}', '{"lev\\u0065l":"x"}', '{"a":01,"level":"x"}', '{"a":"\t","level":"x"}',
    '{"a":{"lvl":"x"},"b":{"level":"y"}}', '{"a":{"lvl":""},"b":{"level":"y"}}', '{}', '{"a":1}warn}',
    '{"a":123456789012345678901234567890,"level":"x"}', '{"a":-0.5,"b":[{"level":"z"}],"c":null}',
    '{"a":' + "9" * 400 + '.5,"level":"x"}',  # msgspec: "Number out of range"
]


@pytest.mark.parametrize("line", EDGES)
def test_levels_at_the_edges_are_the_python_ones(line):
    got = c_levels([line])[0]
    assert got == python_levels([line])[0] or (got is None and json_shaped(line))


def test_json_objects_the_c_parser_answers_or_leaves_to_msgspec():
    answered = c_levels(EDGES[:])
    assert answered[EDGES.index('{"lvl":"dbg","level":"warn"}')] == "warn"
    assert answered[EDGES.index('{"a":{"b":{"level":"x"}}} error')] == "error"
    assert answered[EDGES.index('{"a":{"lvl":""},"b":{"level":"y"}}')] == "y"
    for deferred in ('{"level":"warn","level":"info"}', '{"a":1e400,"level":"x"}',
                     '{"level":"\\u0077arn"}', '{"level":"x"} }', '{"lev\\u0065l":"x"}'):
        assert answered[EDGES.index(deferred)] is None


KEYS = st.sampled_from(["level", "Level", "LEVEL", "lvl", "severity", "log.level", "msg", "a",
                        "b", "level2", ""])
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False,
              allow_infinity=False), st.sampled_from(["", "warn", "INFO", "x", "dbg", "a\"b"]),
              st.text(max_size=5)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(KEYS, JSON_VALUES, max_size=5), st.sampled_from([None, 1]),
       st.lists(st.tuples(st.integers(min_value=0, max_value=200),
                          st.sampled_from(list('{}[]",:\\ 0eE-.tn') + ["", ", "])), max_size=2))
def test_levels_of_json_objects_are_the_python_ones(doc, indent, edits):
    line = json.dumps(doc, indent=indent, ensure_ascii=True)
    for at, text in edits:  # a few edits make most of them invalid in their own ways
        at = min(at, len(line))
        line = line[:at] + text + line[at + 1:]
    got = c_levels([line])[0]
    want = python_levels([line])[0]
    assert got == want or (got is None and json_shaped(line))
    if not edits and "\\" not in line and re.search(r"\d[eE]|\d{19}", line) is None:
        assert got is not None  # a plain object: read in C


@settings(max_examples=600, deadline=None)
@given(st.lists(LINES, min_size=1, max_size=8))
def test_levels_of_generated_lines_are_the_python_ones(lines):
    got = c_levels(lines)
    # it takes every ASCII line that is no JSON object, so the comparison is never empty
    for line, level in zip(lines, got):
        if line.isascii() and not json_shaped(line):
            assert level is not None
        elif not line.isascii():
            assert level is None
    assert [want if level is None else level for level, want in
            zip(got, python_levels(lines))] == python_levels(lines)
    assert DETECTOR.from_lines(lines) == python_levels(lines)


@pytest.mark.parametrize("system", ["Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop",
                                    "HealthApp", "Linux", "Mac", "OpenSSH", "OpenStack",
                                    "Proxifier", "Spark", "Thunderbird", "Windows",
                                    "Zookeeper"])
def test_levels_of_loghub_lines_are_the_python_ones(system):
    lines = loghub_lines(system)
    assert LOGHUB.is_dir() and len(lines) == 2000
    got = c_levels(lines)
    assert sum(level is not None for level in got) >= 1900  # the C scan took them
    assert DETECTOR.from_lines(lines) == python_levels(lines)


def test_a_detector_with_non_ascii_fields_keeps_to_python():
    detector = LevelDetector(["nivéau", "level"])
    assert detector._native is None
    assert detector.from_lines(["nivéau=warn x", "NIVÉAU=info", "level=debug"]) == \
        ["warn", "info", "debug"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=6),
       st.sampled_from([b"", b'{"detected_level":"info"}']))
def test_hashes_and_sizes_are_the_python_ones(lines, md):
    datas = [line.encode("utf-8", "surrogatepass") for line in lines]
    want = (entry_hashes(datas, [md] * len(lines)), [len(d) for d in datas])
    if any("\ud800" <= ch <= "\udfff" for line in lines for ch in line):
        assert linescan.hashes(lines, md) is None  # the caller encodes those
        return
    assert linescan.hashes(lines, md) == want
    assert linescan.hashes(lines, [md] * len(lines)) == want


def test_hashes_are_zlibs_checksums():
    line, md = "ünïcode line", b'{"detected_level":"info"}'
    data = line.encode()
    adler = zlib.adler32(md, zlib.adler32(data)) & 0x7FFFFFFF
    assert linescan.hashes([line], md) == \
        ([(adler << 32) | zlib.crc32(md, zlib.crc32(data))], [len(data)])


def test_a_push_prepares_the_same_rows_without_the_c_loops(monkeypatch):
    lines = loghub_lines("Linux")[:300] + ['{"level":"warn","x":1}', "é level=info",
                                          "lone \ud800 surrogate"]
    entries = [(1_700_000_000_000_000_000 + i, line, None) for i, line in enumerate(lines)]
    limits = LimitsConfig()

    def prepared():
        kept, outcome = Preparer(packs=False).prepare(
            [RawStream([("job", "x")], entries)], 1_700_000_001_000_000_000, limits)
        return [(ps.canonical, ps.rows, ps.size, ps.tallies) for ps in kept], \
            outcome.accepted_lines, outcome.accepted_bytes

    with_c = prepared()
    monkeypatch.setattr(levels_module, "linescan", None)
    monkeypatch.setattr(prepare_module, "linescan", None)
    assert LevelDetector(FIELDS)._native is None
    assert prepared() == with_c
    assert with_c[1] == len(lines)


# timestamps as a push may send them: the C code takes plain digits only, int() more
STAMPS = st.one_of(
    st.integers(min_value=-2**63, max_value=2**64).map(str),
    st.sampled_from(["+5", " 7", "8 ", "1_000", "", "-", "٣", "1.0", "1e3", "0012", "-0",
                     str(TS_MAX), str(TS_MAX + 1), str(TS_MIN), str(TS_MIN - 1),
                     "9223372036854775807", "9223372036854775808", "9999999999999999999",
                     "-9999999999999999999", "99999999999999999999"]))
VALUES = st.lists(st.one_of(
    st.tuples(STAMPS, st.text(max_size=8)).map(list),
    st.tuples(STAMPS, st.text(max_size=4), st.just({"a": "b"})).map(list),
    st.tuples(STAMPS, st.just({"x": "y"})).map(list),
    st.tuples(STAMPS).map(list), st.none()), min_size=1, max_size=6)


def python_entries(values, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(decode_module, "linescan", None)
        return decode_module._json_entries(values)


@settings(max_examples=600, deadline=None)
@given(VALUES)
def test_json_entries_are_the_python_ones(values):
    with pytest.MonkeyPatch.context() as monkeypatch:
        want = python_entries(values, monkeypatch)
    got = linescan.json_entries(values, TS_MIN, TS_MAX)
    if got is not None:
        assert got == want
    plain = all(isinstance(v, list) and len(v) == 2 and isinstance(v[1], str)
                and v[0].lstrip("-").isascii() and v[0].lstrip("-").isdigit()
                and v[0].count("-") <= (1 if v[0].startswith("-") else 0)
                and TS_MIN <= int(v[0]) <= TS_MAX for v in values)
    assert (got is not None) == plain  # it takes every stream of plain digits in range


def test_json_entries_of_a_push_are_taken_in_c(monkeypatch):
    values = [["1700000000000000000", "a"], ["-5", "b"], [str(TS_MAX), "c"]]
    assert linescan.json_entries(values, TS_MIN, TS_MAX) == \
        [(1700000000000000000, "a", None), (-5, "b", None), (TS_MAX, "c", None)]
    assert decode_module._json_entries(values) == python_entries(values, monkeypatch)
    assert linescan.json_entries([["1_0", "a"]], TS_MIN, TS_MAX) is None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=-3 * MINUTE_NS, max_value=3 * MINUTE_NS),
                          st.sampled_from([None, "", "a", "b"]),
                          st.integers(min_value=0, max_value=500)), max_size=12),
       st.booleans())
def test_tallies_are_the_python_ones(rows, one_text):
    stamps = [r[0] for r in rows]
    mds = [rows[0][1] if rows else None] * len(rows) if one_text else [r[1] for r in rows]
    sizes = [r[2] for r in rows]
    want = {(0, "z"): [2, 7]}  # a tally already there is added to
    got = {(0, "z"): [2, 7]}
    tally(want, stamps, mds, sizes)
    linescan.tally(got, stamps, mds[0] if one_text and rows else mds if rows else None,
                   sizes, MINUTE_NS)
    assert list(got.items()) == list(want.items())
