"""A JSON push read into columns and packed in C (services/ingest/_pushcolumns.c, columns.py)
answers as the Python code it stands in for: the same streams and entries as msgspec reads,
and the same prepared streams (rows, pack bytes, tallies, counts) as Preparer's line-by-line
path. Where the C code must leave a body or a stream to Python, it does, and the answer is
still the same. Every push test of the suite goes through this path where it is built."""

from __future__ import annotations

import json

import pytest
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from config import LimitsConfig
from logql.model import TS_MAX, TS_MIN
from proto import push_pb2
from services.ingest import columns
from services.ingest import decode as decode_module
from services.ingest.columns import ColumnStream, read_json
from services.ingest.decode import decode_json, decode_protobuf
from services.ingest.prepare import Preparer
from storage.row_columns import RowColumns
from tests.conftest import needs

pytestmark = needs(columns.pushcolumns is not None, "services/ingest/_pushcolumns.c not built")

NOW = 1_700_000_000_000_000_000


def python_decode(body: bytes, monkeypatch) -> list:
    with monkeypatch.context() as m:
        m.setattr(columns, "pushcolumns", None)
        return [(s.labels, s.entries) for s in decode_json(body)]


def body_of(streams: list[tuple[dict, list]]) -> bytes:
    return json.dumps({"streams": [{"stream": labels, "values": values}
                                   for labels, values in streams]}).encode()


READ_IN_C = [
    body_of([({"job": "a"}, [["1", "plain"], ["2", "tab\there \"quoted\" back\\slash"]])]),
    rb'{"streams":[{"stream":{"job":"a"},"values":[["5","\u00e9t\u00e9 \ud83d\ude00 \/ \b\f"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["5","\r\n\t\"\\ \u0041"]]}]}',
    '{"streams":[{"stream":{"job":"é"},"values":[["7","raw ütf-8 ✓ 😀"]]}]}'.encode(),
    # a name sent twice: its first place, its last value (msgspec's dict)
    rb'{"streams":[{"stream":{"a":"1","b":"2","a":"3"},"values":[["1","x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a","empty":""},"values":[]}]}',
    rb'{"streams":[{"values":[["1","no labels"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"}}]}',
    rb'{"streams":[{}]}',
    rb'{"streams":[]}',
    rb' { "streams" : [ { "values" : [ [ "0001" , "ws" ] ] , "stream" : { "j" : "a" } } ] } ',
    rb'{"streams":[{"stream":{"job":"a\u0000b"},"values":[["9223285636854775807","max"]]}]}',
    rb'{"streams":[{"stream":{"str\u0065am":"escaped name"},"values":[["1","x"]]}]}',
]

LEFT_TO_PYTHON = [
    b"", b"  ", b"null", b"[]", b'{"streams":null}', b'{}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","lone \ud800 surrogate"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","lone \udc00 low"]]}]}',
    b'{"streams":[{"stream":{"job":"a"},"values":[["1","bad \xff utf-8"]]}]}',
    b'{"streams":[{"stream":{"job":"a"},"values":[["1","surrogate \xed\xa0\x80"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","x",{"trace_id":"1"}]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","x"],null]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":null}]}',
    rb'{"streams":[{"stream":null,"values":[["1","x"]]}]}',
    rb'{"streams":[{"stream":{"job":1},"values":[["1","x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[[1,"x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["-1","x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[[" 1","x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1_0","x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["9223285636854775808","past TS_MAX"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["99999999999999999999","x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","x"]],"extra":1}]}',
    rb'{"streams":[{"stream":{"job":"a"},"stream":{"job":"b"},"values":[["1","x"]]}]}',
    rb'{"str\u0065ams":[{"stream":{"job":"a"},"values":[["1","x"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","x"]]}],"other":true}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","x"]]}]} trailing',
    b'{"streams":[{"stream":{"job":"a"},"values":[["1","raw \x01 control"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","bad \x escape"]]}]}',
    rb'{"streams":[{"stream":{"job":"a"},"values":[["1","cut',
]


@pytest.mark.parametrize("body", READ_IN_C)
def test_a_plain_body_is_read_in_c_as_msgspec_reads_it(body, monkeypatch):
    read = read_json(body, TS_MIN, TS_MAX)
    assert read is not None and all(isinstance(s, ColumnStream) for s in read)
    assert [(s.labels, s.entries) for s in read] == python_decode(body, monkeypatch)


@pytest.mark.parametrize("body", LEFT_TO_PYTHON)
def test_any_other_body_is_left_to_the_python_code(body):
    assert read_json(body, TS_MIN, TS_MAX) is None


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(TEXT, TEXT, max_size=3),
                          st.lists(st.tuples(st.integers(0, TS_MAX), TEXT), max_size=4)),
                max_size=3))
def test_generated_bodies_read_alike(streams):
    body = body_of([(labels, [[str(ts), line] for ts, line in values])
                    for labels, values in streams])
    read = read_json(body, TS_MIN, TS_MAX)
    assert read is not None
    saved = columns.pushcolumns
    columns.pushcolumns = None
    try:
        want = [(s.labels, s.entries) for s in decode_json(body)]
    finally:
        columns.pushcolumns = saved
    assert [(s.labels, s.entries) for s in read] == want


# -- prepared streams --------------------------------------------------------------------------

LEVEL_LINES = [
    'ts=2024-01-01 level=info msg="served" status=200',
    "level=WARN disk almost full",
    '{"level":"error","msg":"failed","nested":{"a":1}}',
    '{"msg":"nested level","ctx":{"severity":"debug"}}',
    "panic: an error happened in worker 3",
    "2024-01-01 12:00:00 INFO starting up",
    "nothing to see here",
    "lvl=trace tracing",
    "level=Custom!value odd level",
    "back\\slash line level=fatal",
]


def lines_of(count: int, start: int = 0) -> list[str]:
    return [f"{LEVEL_LINES[(start + i) % len(LEVEL_LINES)]} #{start + i}" for i in range(count)]


def values_of(lines: list[str], step: int = 1_000_000_000, base: int = NOW) -> list:
    return [[str(base + i * step), line] for i, line in enumerate(lines)]


def prepared(body: bytes, lim: LimitsConfig, fast: bool):
    saved = columns.pushcolumns
    if not fast:
        columns.pushcolumns = None
    try:
        return Preparer().prepare(decode_json(body), NOW + 10**12, lim)
    finally:
        columns.pushcolumns = saved


def packed_in_c(ps) -> bool:
    """The stream's rows came from `_pushcolumns.pack`: columns whose lines are only in the
    pack, never a str per line."""
    return type(ps.rows) is RowColumns and ps.rows._lines is None and ps.rows._mds is None


def assert_alike(body: bytes, lim: LimitsConfig | None = None) -> list[bool]:
    """Both paths prepare the body alike; which streams the C code packed."""
    lim = lim or LimitsConfig()
    fast, fast_outcome = prepared(body, lim, True)
    slow, slow_outcome = prepared(body, lim, False)
    in_c = [packed_in_c(ps) for ps in fast]  # before a comparison reads their lines
    assert not any(packed_in_c(ps) for ps in slow)
    assert fast_outcome == slow_outcome
    assert [ps.canonical for ps in fast] == [ps.canonical for ps in slow]
    for a, b in zip(fast, slow):
        assert (a.labels, a.first_ts, a.last_ts, a.size, a.tallies, a.repeats) == \
            (b.labels, b.first_ts, b.last_ts, b.size, b.tallies, b.repeats)
        assert list(a.rows) == list(b.rows)
        assert a.pack == b.pack
    return in_c


def test_a_stream_of_a_pack_or_more_is_packed_in_c_with_the_same_bytes():
    body = body_of([({"job": "a"}, values_of(lines_of(40))),
                    ({"job": "b", "env": "x"}, values_of(lines_of(32, 3)))])
    assert assert_alike(body) == [True, True]


def test_fewer_lines_than_a_pack_are_rows_as_before():
    assert assert_alike(body_of([({"job": "a"}, values_of(lines_of(31)))])) == [False]


def test_out_of_order_and_equal_timestamps_keep_their_arrival_order():
    values = values_of(lines_of(50))
    values[10][0], values[20][0] = values[20][0], values[10][0]
    values[30][0] = values[31][0] = values[5][0]
    assert assert_alike(body_of([({"job": "a"}, values)])) == [True]


def test_the_stream_level_label_gives_every_line_its_level():
    body = body_of([({"job": "a", "level": "WARNING"}, values_of(lines_of(40)))])
    assert assert_alike(body) == [True]


def test_without_level_detection_lines_carry_no_metadata():
    lim = LimitsConfig()
    lim.discover_log_levels = False
    assert assert_alike(body_of([({"job": "a"}, values_of(lines_of(40)))]), lim) == [True]
    lim = LimitsConfig()
    lim.allow_structured_metadata = False
    assert assert_alike(body_of([({"job": "a"}, values_of(lines_of(40)))]), lim) == [True]


def test_lines_the_level_scan_leaves_to_python_are_prepared_there():
    non_ascii = lines_of(40)
    non_ascii[7] = "level=info café"
    msgspec_json = lines_of(40)
    msgspec_json[3] = '{"level":"warn\\u0021"}'
    many_levels = [f"level=l{i}" for i in range(70)]
    body = body_of([({"job": "a"}, values_of(non_ascii)), ({"job": "b"}, values_of(msgspec_json)),
                    ({"job": "c"}, values_of(many_levels))])
    assert assert_alike(body) == [False, False, False]


def test_a_repeat_within_the_push_is_dropped_as_before():
    values = values_of(lines_of(40))
    values[12] = list(values[11])
    assert assert_alike(body_of([({"job": "a"}, values)])) == [False]


def test_a_stream_named_twice_in_a_push_is_one_stream():
    body = body_of([({"job": "a"}, values_of(lines_of(40))),
                    ({"job": "a"}, values_of(lines_of(40, 40), base=NOW + 10**12 // 2))])
    assert assert_alike(body) == [False]


def test_refused_entries_and_streams_answer_as_before():
    too_new = values_of(lines_of(40))
    too_new[-1][0] = str(NOW + 10**13)
    lim = LimitsConfig()
    lim.max_line_size = 40  # some of the lines are longer
    body = body_of([({"job": "a"}, too_new), ({"bad-name": "x"}, values_of(lines_of(40))),
                    ({"job": "b"}, values_of(lines_of(40)))])
    assert assert_alike(body) == [False, True]
    long_lines = body_of([({"job": "c"}, values_of(lines_of(40)))])
    assert assert_alike(long_lines, lim) == [False]


def test_a_protobuf_push_is_packed_in_c_alike():
    """Promtail's and Alloy's bodies: read as columns by _pushproto.columns, packed as a
    JSON push is, prepared as the generated classes' entries are."""
    req = push_pb2.PushRequest()
    for labels, count in (('{job="a", env="x"}', 40), ('{job="b"}', 33), ('{job="c"}', 5)):
        stream = req.streams.add(labels=labels)
        for i, line in enumerate(lines_of(count)):
            entry = stream.entries.add(line=line)
            entry.timestamp.seconds, entry.timestamp.nanos = divmod(NOW + i * 10**9, 10**9)
    body = snappy.compress(req.SerializeToString())
    lim = LimitsConfig()

    def run(fast: bool):
        saved = decode_module.pushproto
        if not fast:
            decode_module.pushproto = None
        try:
            streams = decode_protobuf(body, 1 << 30, None)
            return [type(s) is ColumnStream for s in streams], \
                Preparer().prepare(streams, NOW + 10**12, lim)
        finally:
            decode_module.pushproto = saved

    (read_as_columns, (fast, fast_outcome)), (_, (slow, slow_outcome)) = run(True), run(False)
    assert read_as_columns == [True, True, True]
    assert [packed_in_c(ps) for ps in fast] == [True, True, False]
    assert fast_outcome == slow_outcome
    for a, b in zip(fast, slow, strict=True):
        assert (a.labels, a.canonical, a.tallies, a.size, list(a.rows), a.pack) == \
            (b.labels, b.canonical, b.tallies, b.size, list(b.rows), b.pack)
