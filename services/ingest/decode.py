"""Push bodies decoded for the ingester, with Loki's error texts: bounded decompression
(gzip, deflate, zstd, lz4, snappy; never inflated past the limit, each piece counted in
the in-flight bytes), Loki's JSON and protobuf push bodies and the legacy JSON one, into
`RawStream`s. The HTTP handlers are routes/loki/push.py and routes/loki/otlp.py."""

from __future__ import annotations

import io
import re
import zlib
from itertools import repeat
from typing import Callable

import msgspec
import snappy
from google.protobuf.message import DecodeError

from logql import depth
from logql.model import TS_MAX, TS_MIN
from proto import push_pb2
from services.runtime import memory
from services.ingest.columns import ColumnStream, read_json
from services.ingest.inflight import Held
from services.ingest.prepare import PushError, RawStream
from services.ingest.labelset import LabelSetError, parse_label_set
from services.ingest.levels import linescan

try:  # the protobuf body read from its wire format in C; the generated classes otherwise
    from services.ingest import _pushproto as pushproto
except ImportError:  # pragma: no cover - a checkout whose C files did not build
    pushproto = None

MAX_LABELS_BYTES = 16 << 20  # a protobuf stream's labels text, refused with 413 past it
# label texts of protobuf streams parsed already: a client sends the same streams push after
# push (30 streams: 0.4 of the 1.8 ms a realistic push took to read); bounded in number and
# in each text's length, as the texts are the client's (a label set may be 16 MiB)
LABEL_SETS_KEPT = 4096
LABEL_SET_KEPT_CHARS = 1024
_label_sets: dict[str, tuple[tuple[str, str], ...]] = {}


class JsonStream(msgspec.Struct):
    stream: dict[str, str] | None = None
    values: list[list[str | dict[str, str]] | None] | None = None


class JsonPush(msgspec.Struct):
    streams: list[JsonStream] | None = None


class LegacyEntry(msgspec.Struct):
    ts: str = ""
    line: str = ""


class LegacyStream(msgspec.Struct):
    labels: str = ""
    entries: list[LegacyEntry] | None = None


class LegacyPush(msgspec.Struct):
    streams: list[LegacyStream] | None = None


_json_push = msgspec.json.Decoder(JsonPush)
_legacy_push = msgspec.json.Decoder(LegacyPush)
_TS_PATH = re.compile(r"values\[\d+\]\[0\]`?$")
# The push schema nests five levels and keeps nothing deeper; msgspec skips an unknown
# field by recursing into it, and only that recursion can reach the interpreter's guard
# (far past MAX_DEPTH): refused then, with the bound's text, and the hot path pays nothing.
_TOO_DEEP = f"invalid push request: {depth.JSON_TEXT}"


def decode_content_encoding(body: bytes, encoding: str, limit: int, hold: Held,
                            supported: tuple[str, ...] = ("gzip", "deflate")) -> bytes:
    """The body inflated, never past `limit` + 1 bytes (a small bomb is not inflated whole),
    each inflated piece counted in `hold`: 413 when over the limit, 400 for a broken body,
    503 past `max_inflight_bytes`. `supported` names the encodings the caller allows; others
    are the caller's to refuse before this is called."""
    encoding = encoding.strip().lower()
    if encoding in ("", "snappy", "identity"):
        return body
    if encoding not in supported:
        raise PushError(400, f'Content-Encoding "{encoding}" not supported')
    try:
        out = _INFLATE[encoding](body, limit + 1, hold.add)
    except (OSError, EOFError, zlib.error, ValueError, RuntimeError) as exc:
        raise PushError(400, f"{encoding}: invalid compressed body: {exc}") from None
    if len(out) > limit:
        size = len(out)
        del out
        memory.trim_soon()  # the refused body was inflated up to the limit: give it back
        raise PushError(413, "request body too large: decompressed message size too large than "
                             f"max ({size} vs {limit})")
    return out


INFLATE_CHUNK = 1 << 20
Step = Callable[[int], tuple[bytes, bool]]  # up to n more bytes, and whether that was all


def _in_steps(most: int, count: Callable[[int], None], step: Step) -> bytearray:
    """Inflated output, at most `most` bytes, grown INFLATE_CHUNK at a time into one buffer
    (each piece counted): a decoder asked for `most` bytes at once keeps its output blocks
    and the joined result alive together, 1.6 times the body."""
    out = bytearray()
    while len(out) < most:
        piece, done = step(min(INFLATE_CHUNK, most - len(out)))
        count(len(piece))
        out += piece
        if done:
            break
    return out


def _inflate_zlib(wbits: int):
    def inflate(body: bytes, most: int, count: Callable[[int], None]) -> bytearray:
        d = zlib.decompressobj(wbits)
        data = body

        def step(n: int) -> tuple[bytes, bool]:
            nonlocal data
            piece = d.decompress(data, n)
            data = d.unconsumed_tail
            return piece, d.eof or (not piece and not data)

        out = _in_steps(most, count, step)
        if len(out) < most and not d.eof:
            raise EOFError("unexpected end of compressed data")
        return out
    return inflate


def _inflate_zstd(body: bytes, most: int, count: Callable[[int], None]) -> bytearray:
    import zstandard  # only OTLP clients send zstd
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)) as reader:
        def step(n: int) -> tuple[bytes, bool]:
            piece = reader.read(n)
            return piece, not piece

        out = _in_steps(most, count, step)
    if len(out) < most:
        # the reader ends quietly where a cut body ends: a frame that never finished is
        # refused, as gzip, deflate and lz4 refuse theirs (inflating it again costs no more
        # than the reader just inflated, which stayed under the limit)
        check = zstandard.ZstdDecompressor().decompressobj()
        check.decompress(body)
        if not check.eof:
            raise EOFError("unexpected end of zstd frame")
    return out


def _inflate_lz4(body: bytes, most: int, count: Callable[[int], None]) -> bytearray:
    import lz4.frame  # only OTLP clients send lz4
    d = lz4.frame.LZ4FrameDecompressor()
    data = body

    def step(n: int) -> tuple[bytes, bool]:
        nonlocal data
        piece = d.decompress(data, max_length=n)
        data = b""  # the whole frame went in with the first call
        return piece, d.eof or (not piece and d.needs_input)

    out = _in_steps(most, count, step)
    if len(out) < most and not d.eof:
        raise EOFError("unexpected end of lz4 frame")
    return out


_INFLATE = {"gzip": _inflate_zlib(16 + zlib.MAX_WBITS), "deflate": _inflate_zlib(-zlib.MAX_WBITS),
            "zstd": _inflate_zstd, "lz4": _inflate_lz4}


def _json_error(exc: msgspec.DecodeError) -> str:
    text = str(exc)
    if "got `int`" in text or "got `float`" in text:
        path = text.rsplit(" - at ", 1)[-1]
        if _TS_PATH.search(path.rstrip("`")):
            return (f"invalid timestamp at {path.strip('`')}: timestamps must be strings of "
                    'Unix epoch nanoseconds, e.g. "1700000000000000000"')
    return f"invalid push request: {text}"


def _valid_utf8(body: bytes) -> bytes:
    """Invalid UTF-8 in strings becomes U+FFFD, as Go's JSON decoder (Loki's) does."""
    return body.decode("utf-8", "replace").encode("utf-8")


def _decode_lenient(decoder: msgspec.json.Decoder, body: bytes):
    """The body decoded, again with invalid UTF-8 read as U+FFFD when it holds some."""
    try:
        return decoder.decode(body)
    except UnicodeDecodeError:
        return decoder.decode(_valid_utf8(body))


def _ts_in_range(ts: int, where: str, text: object) -> int:
    if not TS_MIN <= ts <= TS_MAX:
        raise PushError(400, f'invalid timestamp "{text}" at {where}: value out of range '
                             "(1677-09-23 to 2262-04-10 in nanoseconds)")
    return ts


def decode_json(body: bytes) -> list[RawStream | ColumnStream]:
    columns = read_json(body, TS_MIN, TS_MAX)
    if columns is not None:  # the common body, read in C (services/ingest/columns.py)
        return columns
    if not body.strip():
        raise PushError(400, "EOF")
    try:
        req = _decode_lenient(_json_push, body)
    except msgspec.DecodeError as exc:
        raise PushError(400, _json_error(exc)) from None
    except RecursionError:
        raise PushError(400, _TOO_DEEP) from None
    out = []
    for si, stream in enumerate(req.streams or ()):
        entries = _json_entries(stream.values) if stream.values else []
        if entries is None:
            entries = _json_entries_checked(si, stream.values)
        out.append(RawStream(list((stream.stream or {}).items()), entries))
    return out


def _json_entries(values: list) -> list | None:
    """A stream's entries a column at a time, when every one is well formed; None when one
    is not (or may not be): _json_entries_checked then finds the first fault and its text.
    In C (_linescan.json_entries) when every timestamp is plain digits: 500 streams of 10
    entries 3.5 -> 1.4 ms."""
    if linescan is not None:
        entries = linescan.json_entries(values, TS_MIN, TS_MAX)
        if entries is not None:
            return entries
    try:
        if min(map(len, values)) < 2 or max(map(len, values)) > 2:
            return None  # a null value, a short one, or metadata
        ts_texts = [v[0] for v in values]
        lines = [v[1] for v in values]
        # join refuses anything but str (a timestamp or line sent as an object)
        "".join(ts_texts)
        "".join(lines)
        tss = list(map(int, ts_texts))
    except (TypeError, ValueError):
        return None
    if not TS_MIN <= min(tss) <= max(tss) <= TS_MAX:
        return None
    return list(zip(tss, lines, repeat(None)))


def _json_entries_checked(si: int, values: list) -> list:
    """Entry by entry, refusing the first malformed one with its place in the body."""
    entries = []
    for ei, value in enumerate(values):
        if value is None:
            continue
        if len(value) < 2:
            raise PushError(400, f"invalid entry at $.streams[{si}].values[{ei}]: an entry is "
                                 "[timestamp, line] or [timestamp, line, {metadata}]")
        ts_text, line = value[0], value[1]
        md = value[2] if len(value) > 2 else None
        if type(ts_text) is not str:
            raise PushError(400, f"invalid timestamp at $.streams[{si}].values[{ei}][0]: "
                                 "timestamps must be strings of Unix epoch nanoseconds")
        if type(line) is not str:
            raise PushError(400, f"invalid line at $.streams[{si}].values[{ei}][1]: "
                                 "the log line must be a string")
        if md is not None and type(md) is not dict:
            raise PushError(400, f"invalid structured metadata at $.streams[{si}].values[{ei}]"
                                 "[2]: must be an object of string values")
        try:
            ts = int(ts_text)
        except ValueError:
            raise PushError(400, f'invalid timestamp "{ts_text}" at $.streams[{si}]'
                                 f".values[{ei}][0]: timestamps must be strings of Unix "
                                 "epoch nanoseconds") from None
        entries.append((_ts_in_range(ts, f"$.streams[{si}].values[{ei}][0]", ts_text),
                        line, md))
    return entries


def snappy_decoded_len(body: bytes) -> int:
    """The length a raw snappy block says it inflates to (its leading varint), -1 if the
    varint is broken: read before inflating, so a small bomb is refused without it."""
    size = shift = 0
    for byte in body[:5]:
        size |= (byte & 0x7F) << shift
        if byte < 0x80:
            return size
        shift += 7
    return -1


def snappy_size(body: bytes, limit: int) -> int:
    """What a snappy body says it inflates to (-1: unreadable), refused past `limit`."""
    declared = snappy_decoded_len(body)
    if declared > limit:
        raise PushError(413, "request body too large: decompressed message size too large than "
                             f"max ({declared} vs {limit})")
    return declared


JSON_MEDIA = "application/json"


def decode_body(media: str, body: bytes, limit: int, hold: Held | None
                ) -> list[RawStream | ColumnStream]:
    """A push body of Loki's JSON, or else of its snappy protobuf (`hold`: None when the
    inflated size is counted elsewhere)."""
    if media == JSON_MEDIA:
        return decode_json(body)
    return decode_protobuf(body, limit, hold)


def decode_protobuf(body: bytes, limit: int, hold: Held | None
                    ) -> list[RawStream | ColumnStream]:
    declared = snappy_size(body, limit)
    if hold is not None:
        hold.add(max(declared, 0))
    try:
        raw = snappy.uncompress(body)
    except Exception:  # noqa: BLE001 - python-snappy raises several types for bad input
        raise PushError(400, "snappy: corrupt input") from None
    if pushproto is not None:
        # entries without metadata: one buffer of lines per stream (services/ingest/columns.py)
        cols = pushproto.columns(raw, TS_MIN, TS_MAX, MAX_LABELS_BYTES)
        if cols is not None:
            return [ColumnStream(_label_pairs(labels), *rest) for labels, *rest in cols]
        read = pushproto.streams(raw, TS_MIN, TS_MAX, MAX_LABELS_BYTES)
        if read is not None:
            return [RawStream(_label_pairs(labels), entries) for labels, entries in read]
    try:
        req = push_pb2.PushRequest.FromString(raw)
    except DecodeError as exc:
        raise PushError(400, f"proto: cannot parse invalid wire-format data: {exc}") from None
    out = []
    for stream in req.streams:
        if len(stream.labels) > MAX_LABELS_BYTES:
            raise PushError(413, "labels too large")
        pairs = _label_pairs(stream.labels)
        entries = []
        for e in stream.entries:
            ts = _ts_in_range(e.timestamp.seconds * 10**9 + e.timestamp.nanos,
                              "entry timestamp", f"{e.timestamp.seconds}s")
            md = {p.name: p.value for p in e.structuredMetadata} or None
            entries.append((ts, e.line, md))
        out.append(RawStream(pairs, entries))
    return out


def _label_pairs(text: str) -> list[tuple[str, str]]:
    """A protobuf stream's labels text as pairs in text order (parse_label_set)."""
    pairs = _label_sets.get(text)
    if pairs is None:
        try:
            pairs = tuple(parse_label_set(text))
        except LabelSetError as exc:
            raise PushError(400, f"couldn't parse labels: {exc}") from None
        if len(text) <= LABEL_SET_KEPT_CHARS:
            if len(_label_sets) >= LABEL_SETS_KEPT:
                _label_sets.clear()
            _label_sets[text] = pairs
    return list(pairs)


def decode_legacy_json(body: bytes, parse_ts: Callable[[str], int]) -> list[RawStream]:
    if not body.strip():
        raise PushError(400, "EOF")
    try:
        req = _decode_lenient(_legacy_push, body)
    except msgspec.DecodeError as exc:
        raise PushError(400, f"invalid push request: {exc}") from None
    except RecursionError:
        raise PushError(400, _TOO_DEEP) from None
    out = []
    for stream in req.streams or ():
        if not stream.entries:
            # a v1-shaped body lands here: a stream without entries, 204 and nothing stored
            out.append(RawStream([], []))
            continue
        try:
            pairs = parse_label_set(stream.labels)
        except LabelSetError as exc:
            raise PushError(400, f"couldn't parse labels: {exc}") from None
        entries = []
        for e in stream.entries:
            try:
                ts = parse_ts(e.ts)
            except ValueError as exc:
                raise PushError(400, str(exc)) from None
            entries.append((ts, e.line, None))
        out.append(RawStream(pairs, entries))
    return out
