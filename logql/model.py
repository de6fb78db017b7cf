"""The one model of labels shared by the parser, the pipeline, storage and services: how a
label set prints (Loki's `{a="1", b="2"}`, also a stream's stored identity) and what a label
matcher offers."""

from __future__ import annotations

from typing import Iterable, Protocol


class Matcher(Protocol):
    name: str
    op: str
    value: str

    def matches(self, value: str) -> bool: ...


def escape_value(value: str) -> str:
    """Go strconv.Quote-compatible enough for label values: \\ " and control characters."""
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
    return "{" + ", ".join(f'{k}="{escape_value(labels[k])}"' for k in sorted(labels)) + "}"


def label_pairs_string(pairs: Iterable[tuple[str, str]]) -> str:
    """`{a="1", b="2"}` for pairs already in the wanted order (Prometheus labels.String())."""
    return "{" + ", ".join(f'{k}="{escape_value(v)}"' for k, v in pairs) + "}"


# The timestamps logstore takes: int64 nanoseconds less a day at each end, so that window
# arithmetic near the edges of time never overflows SQLite's INTEGER
TS_MIN, TS_MAX = -(1 << 63) + 86400 * 10**9, (1 << 63) - 1 - 86400 * 10**9
