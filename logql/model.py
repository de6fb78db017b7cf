"""The one model of labels shared by the parser, the pipeline, storage and services: how a
label set prints (Loki's `{a="1", b="2"}`, also a stream's stored identity) and what a label
matcher offers; with the few plain types and constants both the language and storage speak
(storage may import nothing else of logql)."""

from __future__ import annotations

import json
import re
from typing import Iterable, Protocol, Sequence


class Matcher(Protocol):
    name: str
    op: str
    value: str

    def matches(self, value: str) -> bool: ...


_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f\\"]')


def escape_value(value: str) -> str:
    """Go strconv.Quote-compatible enough for label values: \\ " and control characters."""
    if _NEEDS_ESCAPE.search(value) is None:
        return value  # nearly every value: one C scan instead of a loop per character
    out = []
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def canonical_labels(labels: dict[str, str]) -> str:
    """`{a="1", b="2"}`: sorted by name; the identity of a stream."""
    return canonical_pairs(sorted(labels.items()))


def canonical_pairs(pairs: Sequence[tuple[str, str]]) -> str:
    """canonical_labels of (name, value) pairs already sorted by name (a result's grouping
    key), with no dict built and sorted again."""
    if _NEEDS_ESCAPE.search("".join([v for _, v in pairs])) is None:
        # nearly always: one scan of all the values, not one per value (15 labels: 2.8 us
        # against 4.5)
        return "{" + ", ".join([f'{k}="{v}"' for k, v in pairs]) + "}"
    return "{" + ", ".join([f'{k}="{escape_value(v)}"' for k, v in pairs]) + "}"


_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_CANONICAL_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|.)")


def parse_canonical(text: str) -> dict[str, str]:
    """The labels of a `canonical_labels` text (its exact inverse): how a stream's label set
    is read back from its stored identity, one row per stream, with no join."""
    # no value holds a quote, so `", ` separates the pairs, unless a value starts with `, `
    if "\\" not in text and '=", ' not in text:
        if len(text) <= 2:
            return {}
        # name, value, name, value...: two C calls instead of a split per pair
        flat = text[1:-2].replace('", ', '="').split('="')
        return dict(zip(flat[::2], flat[1::2]))
    return {name: _ESCAPE.sub(_unescape, value)
            for name, value in _CANONICAL_PAIR.findall(text)}


def labels_json(labels: dict[str, str]) -> str:
    """A label set as a JSON object text, keys in the dict's order: what msgspec and Loki
    write (UTF-8 as it is, only quotes, backslashes and control characters escaped)."""
    return json.dumps(labels, ensure_ascii=False, separators=(",", ":"))


def canonical_json(text: str) -> str:
    """`labels_json(parse_canonical(text))`, without the dict when no value holds an escape:
    /series sends tens of thousands of label sets, and such a text becomes its JSON by two
    replacements (a value without a backslash holds no quote or control character, so
    `", ` and `="` occur only between pairs)."""
    if "\\" not in text and '=", ' not in text:
        if len(text) <= 2:
            return "{}"
        return '{"' + text[1:-2].replace('", ', '","').replace('="', '":"') + '"}'
    return labels_json(parse_canonical(text))


def _unescape(m: "re.Match[str]") -> str:
    code = m.group(1)
    return chr(int(code[1:], 16)) if len(code) == 3 else _UNESCAPES[code]


def label_pairs_string(pairs: Iterable[tuple[str, str]]) -> str:
    """`{a="1", b="2"}` for pairs already in the wanted order (Prometheus labels.String())."""
    return "{" + ", ".join(f'{k}="{escape_value(v)}"' for k, v in pairs) + "}"


# The timestamps logstore takes: int64 nanoseconds less a day at each end, so that window
# arithmetic near the edges of time never overflows SQLite's INTEGER
TS_MIN, TS_MAX = -(1 << 63) + 86400 * 10**9, (1 << 63) - 1 - 86400 * 10**9
# rollups count per minute: whole-minute windows are answered from them
MINUTE_NS = 60 * 10**9

# (needle, case_insensitive): an AND of ORs of these is what a query's line filters demand,
# which storage checks against block Bloom filters and the full-text index
Needle = tuple[str, bool]
