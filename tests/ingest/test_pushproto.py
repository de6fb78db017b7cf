"""Loki's protobuf push body read from its wire format in C (services/ingest/_pushproto.c)
answers as the generated classes do: the same streams, entries and metadata for every body
it reads, and for every body it leaves to them (a field sent twice, invalid UTF-8, a
timestamp out of range, a cut or corrupted body) the same value or the same error."""

from __future__ import annotations

import pytest
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from logql.model import TS_MAX, TS_MIN
from proto import push_pb2
from services.ingest import decode as decode_module
from services.ingest.decode import MAX_LABELS_BYTES, decode_protobuf, pushproto
from services.ingest.prepare import PushError
from tests.conftest import needs

pytestmark = needs(pushproto is not None, "services/ingest/_pushproto.c not built")

LIMIT = 1 << 30
SECONDS = st.one_of(st.integers(min_value=-9_300_000_000, max_value=9_300_000_000),
                    st.sampled_from([0, 1_700_000_000, TS_MAX // 10**9, TS_MIN // 10**9,
                                     -(1 << 63), (1 << 63) - 1]))
NANOS = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
TEXT = st.text(max_size=12)
PAIRS = st.lists(st.tuples(TEXT, TEXT), max_size=3)
ENTRY = st.fixed_dictionaries({"line": TEXT, "metadata": PAIRS},
                              optional={"seconds": SECONDS, "nanos": NANOS})
LABELS = st.one_of(
    st.sampled_from(['{app="api"}', '{app="api", env="prod"}', '{a="1"}', "", "{}", "{x=}",
                     '{app="caf\u00e9", pod="p-1"}']),
    st.builds(lambda k, v: '{%s="%s"}' % (k, v), st.from_regex(r"[a-z_]{1,6}", fullmatch=True),
              st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                             blacklist_characters='"\\'), max_size=6)))
STREAM = st.fixed_dictionaries({"labels": LABELS, "entries": st.lists(ENTRY, max_size=4)},
                               optional={"hash": st.integers(0, (1 << 64) - 1)})
REQUEST = st.fixed_dictionaries({"streams": st.lists(STREAM, max_size=3)},
                                optional={"format": TEXT})


def encode(request: dict) -> bytes:
    req = push_pb2.PushRequest(format=request.get("format", ""))
    for s in request["streams"]:
        stream = req.streams.add(labels=s["labels"], hash=s.get("hash", 0))
        for e in s["entries"]:
            entry = stream.entries.add(line=e["line"])
            if "seconds" in e or "nanos" in e:
                entry.timestamp.seconds = e.get("seconds", 0)
                entry.timestamp.nanos = e.get("nanos", 0)
            for name, value in e["metadata"]:
                entry.structuredMetadata.add(name=name, value=value)
    return req.SerializeToString()


def outcome(raw: bytes, in_c: bool) -> object:
    """What decode_protobuf answers for the inflated body: its streams, or its error."""
    saved = decode_module.pushproto
    decode_module.pushproto = pushproto if in_c else None
    try:
        return [(r.labels, r.entries) for r in decode_protobuf(snappy.compress(raw), LIMIT,
                                                               None)]
    except PushError as exc:
        return exc.status, str(exc)
    finally:
        decode_module.pushproto = saved


def in_range(request: dict) -> bool:
    return all(TS_MIN <= e.get("seconds", 0) * 10**9 + e.get("nanos", 0) <= TS_MAX
               for s in request["streams"] for e in s["entries"])


@settings(max_examples=500, deadline=None)
@given(REQUEST)
def test_a_body_is_read_as_the_generated_classes_read_it(request):
    raw = encode(request)
    read = pushproto.streams(raw, TS_MIN, TS_MAX, MAX_LABELS_BYTES)
    # every well-formed body with its timestamps in range is read in C
    assert (read is not None) == in_range(request)
    assert outcome(raw, True) == outcome(raw, False)


@settings(max_examples=500, deadline=None)
@given(REQUEST, st.data())
def test_a_cut_or_corrupted_body_answers_as_before(request, data):
    raw = bytearray(encode(request))
    if raw:
        for _ in range(data.draw(st.integers(1, 3))):
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] = data.draw(st.integers(0, 255))
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    raw = bytes(raw) + data.draw(st.binary(max_size=4))
    assert outcome(raw, True) == outcome(raw, False)


def entry_bytes(*fields: bytes) -> bytes:
    return b"".join(fields)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (payloads here are short: a one-byte length)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 as protobuf sends it: ten bytes
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


STAMP = field(1, b"\x08" + varint(1_700_000_000))
LINE = field(2, b"hello")


def stream_of(*entries: bytes, labels: bytes = b'{app="a"}') -> bytes:
    return field(1, field(1, labels) + b"".join(field(2, e) for e in entries))


def test_what_the_reader_takes_and_what_it_leaves(monkeypatch):
    taken = stream_of(entry_bytes(STAMP, LINE, field(3, field(1, b"k") + field(2, b"v"))))
    assert pushproto.streams(taken, TS_MIN, TS_MAX, MAX_LABELS_BYTES) == \
        [('{app="a"}', [(1_700_000_000 * 10**9, "hello", {"k": "v"})])]
    left = {
        "a second timestamp, merged into the first": stream_of(entry_bytes(STAMP, LINE, STAMP)),
        "a second line": stream_of(entry_bytes(STAMP, LINE, LINE)),
        "invalid UTF-8 in a line": stream_of(entry_bytes(STAMP, field(2, b"\xff"))),
        "invalid UTF-8 in the labels": stream_of(entry_bytes(STAMP, LINE), labels=b"\xc3("),
        "the parsed pairs": stream_of(entry_bytes(STAMP, LINE, field(4, field(1, b"k")))),
        "a line sent as a varint": stream_of(entry_bytes(STAMP, b"\x10\x01")),
        "a group": stream_of(entry_bytes(STAMP, LINE, b"\x2b\x2c")),
        "a cut body": stream_of(entry_bytes(STAMP, LINE))[:-2],
    }
    for why, raw in left.items():
        assert pushproto.streams(raw, TS_MIN, TS_MAX, MAX_LABELS_BYTES) is None, why
        assert outcome(raw, True) == outcome(raw, False), why
    # a ten-byte varint keeps its low 64 bits, as upb does; an eleventh byte is corrupt
    for seconds in (b"\x80" * 9 + b"\x02", b"\x80" * 10 + b"\x00"):
        raw = stream_of(entry_bytes(field(1, b"\x08" + seconds), LINE))
        assert outcome(raw, True) == outcome(raw, False)
    # labels past the limit: left to decode.py, which refuses them with 413
    assert pushproto.streams(taken, TS_MIN, TS_MAX, 8) is None


def test_a_timestamp_out_of_range_is_refused_with_its_text():
    raw = stream_of(entry_bytes(field(1, b"\x08" + varint(-(1 << 62))), LINE))
    assert pushproto.streams(raw, TS_MIN, TS_MAX, MAX_LABELS_BYTES) is None
    status, text = outcome(raw, True)
    assert status == 400 and text.startswith('invalid timestamp "') and "out of range" in text


@pytest.mark.parametrize("labels", ['{app="api"}', '{app="api", env="prod"}'])
def test_a_label_set_sent_again_is_parsed_once(labels):
    decode_module._label_sets.clear()
    raw = encode({"streams": [{"labels": labels, "entries": []}] * 3})
    first, again = (decode_protobuf(snappy.compress(raw), LIMIT, None) for _ in range(2))
    assert [s.labels for s in first] == [s.labels for s in again] == \
        [[tuple(p.split("=")) for p in labels.strip("{}").replace('"', "").split(", ")]] * 3
    assert list(decode_module._label_sets) == [labels]
    first[0].labels.append(("x", "y"))  # a caller's list is its own
    assert decode_protobuf(snappy.compress(raw), LIMIT, None)[0].labels == again[0].labels


def test_a_long_label_set_is_not_kept():
    decode_module._label_sets.clear()
    labels = '{app="%s"}' % ("x" * decode_module.LABEL_SET_KEPT_CHARS)
    raw = encode({"streams": [{"labels": labels, "entries": [{"line": "a", "metadata": []}]}]})
    streams = decode_protobuf(snappy.compress(raw), LIMIT, None)
    assert streams[0].labels == [("app", "x" * decode_module.LABEL_SET_KEPT_CHARS)]
    assert not decode_module._label_sets  # kept, 4,096 texts of 16 MiB would be 64 GiB


def test_a_body_without_metadata_is_read_as_columns():
    """The columns (services/ingest/columns.py) of a body whose entries carry no metadata
    hold what streams() reads; an entry with metadata leaves the body to streams()."""
    plain = stream_of(entry_bytes(STAMP, LINE), entry_bytes(STAMP, field(2, "é ✓".encode())),
                      entry_bytes(STAMP), labels=b'{app="a", app="b"}')
    cols = pushproto.columns(plain, TS_MIN, TS_MAX, MAX_LABELS_BYTES)
    assert cols is not None
    labels, ts, text, ends, ascii_only, lo, hi, longest = cols[0]
    ns = 1_700_000_000 * 10**9
    assert (labels, ascii_only, lo, hi, longest) == ('{app="a", app="b"}', False, ns, ns, 6)
    assert (ts, text, ends) == (ns.to_bytes(8, "little") * 3, "helloé ✓".encode(),
                                b"".join(n.to_bytes(4, "little") for n in (5, 11, 11)))
    # through decode_protobuf: the label set's repeated name is refused later, as before
    streams = decode_protobuf(snappy.compress(plain), LIMIT, None)
    assert type(streams[0]).__name__ == "ColumnStream"
    assert [(s.labels, s.entries) for s in streams] == \
        [([("app", "a"), ("app", "b")], [(ns, "hello", None), (ns, "é ✓", None),
                                         (ns, "", None)])]
    with_metadata = stream_of(entry_bytes(STAMP, LINE, field(3, field(1, b"k"))))
    assert pushproto.columns(with_metadata, TS_MIN, TS_MAX, MAX_LABELS_BYTES) is None
    assert pushproto.streams(with_metadata, TS_MIN, TS_MAX, MAX_LABELS_BYTES) is not None
