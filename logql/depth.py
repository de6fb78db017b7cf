"""How deeply a client's input may nest: the bounds and the one check behind them (issue 28).

Every decoder and parser that recurses (msgspec and Python's json in C, PyYAML's composer,
the Go template parser and executor, the LogQL parser, protobuf) runs on the interpreter's
stack, whose guard raises RecursionError at about 1000 frames, wherever the call happens to
start. A request is therefore measured *before* it is handed to one of them, against a bound
stated here, and refused with 400 and a text naming that bound; what is handed on can then
never reach the guard. The module sits at the bottom of the import graph (it imports nothing
of logstore) so that routes, services and the language all use these same numbers.

Log lines are data, not requests: a line is stored however deep it nests, and readers of it
(`| json`, level detection, detected fields) treat a line too deep to decode (the decoder's
RecursionError) as a line that is not JSON, and walk what they decoded without recursion.
"""

from __future__ import annotations

from array import array
from itertools import accumulate

import yaml

# JSON and YAML documents a client sends: Grafana dashboards and every other /api body,
# OTLP/JSON, rule groups, the skipped parts of push bodies. Real ones nest a few dozen
# levels at most; 200 keeps the deepest recursion (PyYAML's composer, three frames a level)
# far from the interpreter's guard, from any caller.
MAX_DEPTH = 200
# Go templates (line_format, label_format, alert labels and annotations): nested
# {{if}}/{{range}}/{{with}} bodies and parenthesised pipelines, counted together. Go caps
# the parentheses at 10000 and the bodies not at all; each level costs several frames here.
MAX_TEMPLATE_DEPTH = 100
# Protobuf bodies (push, OTLP) are decoded by upb, which refuses messages nested deeper
# than 100 by itself ("Exceeded upb_DecodeOptions_MaxDepth"): stated here, not enforced here.
MAX_PROTOBUF_DEPTH = 100

# The texts: Go's where Go has one (encoding/json "exceeded max depth", yaml.v3 "yaml:
# exceeded max depth of N", text/template "max expression depth exceeded"), with the bound.
JSON_TEXT = f"exceeded max depth of {MAX_DEPTH}"
YAML_TEXT = f"yaml: exceeded max depth of {MAX_DEPTH}"
TEMPLATE_TEXT = f"max expression depth exceeded (limit {MAX_TEMPLATE_DEPTH})"
# A log line is not refused, however deep: a reader that cannot descend it says this
# (Go's encoding/json text) where it reports why the line is not JSON (`__error_details__`).
LINE_TEXT = "exceeded max depth"
# LogQL keeps the text it always had: its parser stops at the interpreter's guard
# (a query is at most 128 KiB and its parse is pure, so the guard is a clean bound there)
QUERY_TEXT = "expression nests too deeply"


class TooDeep(ValueError):
    """The input nests deeper than its bound; `str()` is the text a client is answered."""


_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes


def json_depth(data: bytes) -> int:
    """How deep the JSON text `data` nests (objects and arrays), counted without recursion
    and without decoding: strings are cut out, brackets kept, the running sum's maximum
    taken, all in C loops. An unclosed bracket counts as open (so `[[[[...` is deep)."""
    # strings are cut out first, "[[[" is data: escaped backslashes, then escaped quotes
    # go, so every quote left opens or closes a string and every other piece is outside one
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(unescaped.split(b'"')[::2])
    steps = outside.translate(_STEP, _NOT_BRACKET)
    return max(accumulate(array("b", steps)), default=0)


def check_json(data: bytes | str, limit: int = MAX_DEPTH, text: str = JSON_TEXT) -> None:
    """Raise TooDeep when the JSON text `data` nests deeper than `limit`. Costs two byte
    counts when the text has no more brackets than the bound (most bodies)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if data.count(b"[") + data.count(b"{") <= limit:
        return
    if json_depth(data) > limit:
        raise TooDeep(text)


class Nesting:
    """A counter for a recursive-descent parser: `enter()` on the way into a nested
    construct (raising TooDeep past `limit`), `leave()` on the way out."""

    __slots__ = ("depth", "limit", "text")

    def __init__(self, limit: int, text: str):
        self.depth, self.limit, self.text = 0, limit, text

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.limit:
            raise TooDeep(self.text)

    def leave(self) -> None:
        self.depth -= 1


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's scanner and parser are iterative; only composing a node recurses (three
    frames a level), so that is where the depth is counted."""

    def __init__(self, stream):
        super().__init__(stream)
        self.nesting = Nesting(MAX_DEPTH, YAML_TEXT)

    def compose_node(self, parent, index):
        self.nesting.enter()
        try:
            return super().compose_node(parent, index)
        finally:
            self.nesting.leave()


def load_yaml(text: str):
    """`yaml.safe_load`, refusing a document nested deeper than MAX_DEPTH with TooDeep
    (yaml.v3's text) before the composer's recursion gets near the interpreter's guard."""
    return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass
