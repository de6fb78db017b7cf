"""JSON-based parser stages: `| json` (all fields, or `| json a="x.y[0]"` extractions) and
`| unpack` (logql.md §5.4.1, §5.4.2, §5.4.8); key rules shared with the other parsers."""

from __future__ import annotations

import json
import math
import re
from json.decoder import scanstring

import msgspec

from logql import depth
from logql.gocompat.filters import PipelineError
from logql.pipeline.builder import ERROR, ERROR_DETAILS, EXTRACTED_SUFFIX, JSON_PARSER_ERR
from logql.pipeline.keys import (LABEL_NAME, fix_surrogates, json_segment, set_parsed,
                                 sanitize_key)


# --------------------------------------------------------------------------- json

def _reject_constant(name: str):
    raise ValueError(f"invalid JSON constant {name}")


# Numbers are kept as their source text; objects become tuples of (key, value)
# pairs so duplicate keys stay visible (first one wins) and arrays stay lists.
_JSON_TOKENS = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=_reject_constant,
                                object_pairs_hook=tuple)
_JSON_PLAIN = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=tuple)

_ERR_OBJECT = "Value looks like object, but can't find closing '}' symbol"
_ERR_STRING = "Value is string, but can't find closing '\"' symbol"
_ERR_ESCAPE = "Encountered an invalid escape sequence in a string"
_ERR_MALFORMED = "Malformed JSON error"
# (prefix, JSON key) -> (the joined name nested keys extend, the label name of a value)
_NAMES: dict[tuple[str, str], tuple[str, str]] = {}
_SPECIAL_NAMES = frozenset((ERROR, ERROR_DETAILS))


def _names_of(prefix: str, key: str) -> tuple[str, str]:
    """The name a key's nested keys are joined to, and the label name of its value (a name
    that starts with a digit gets a `_`: the rule applies to the whole joined name only)."""
    seg = json_segment(key)
    joined = prefix + "_" + seg if prefix and seg else prefix or seg
    return joined, "_" + joined if joined and joined[0] in "0123456789" else joined


def _json_error_text(exc: Exception) -> str:
    """Map Python's decoder message to the buger/jsonparser text Loki reports."""
    msg = str(exc)
    if msg.startswith("Unterminated string"):
        return _ERR_STRING
    if msg.startswith("Invalid \\escape") or msg.startswith("Invalid \\uXXXX"):
        return _ERR_ESCAPE
    if msg.startswith("Expecting ':' delimiter"):
        return _ERR_MALFORMED
    return _ERR_OBJECT


def _parse_json_object(line: str, decoder):
    """The line's top-level object as a tuple of pairs, or raise ValueError."""
    start = 0
    n = len(line)
    while start < n and line[start] in " \t\r\n":
        start += 1
    if start >= n or line[start] != "{":
        raise ValueError("not an object")
    value, _end = decoder.raw_decode(line, start)  # trailing text is ignored, like jsonparser
    return value


class JsonParser:
    """`| json` (extractions None) or `| json a="expr", b="c.d[0]"`.

    `extractions`: list of (label_name, expression); a bare `| json c` is ("c", "c").
    Raises PipelineError for a bad expression or label name.
    """

    __slots__ = ("extractions", "_paths")

    def __init__(self, extractions: list[tuple[str, str]] | None = None):
        self.extractions = list(extractions) if extractions else None
        self._paths = None
        if self.extractions:
            paths = []
            for name, expr in self.extractions:
                if not LABEL_NAME.fullmatch(name):
                    raise PipelineError(f"invalid extracted label name '{name}'")
                paths.append((name, parse_json_path(expr)))
            self._paths = tuple(paths)

    def process(self, ts: int, line: str, labels) -> str | None:
        if self._paths is None:
            self._process_all(line, labels)
        else:
            self._process_paths(line, labels)
        return line

    def _process_all(self, line: str, labels) -> None:
        try:
            obj = _parse_json_object(line, _JSON_TOKENS)
        except RecursionError:  # the decoder stopped at the interpreter's guard
            labels.set_error(JSON_PARSER_ERR, depth.LINE_TEXT)
            return
        except Exception as exc:  # noqa: BLE001 - any decoder failure is a JSONParserErr
            labels.set_error(JSON_PARSER_ERR, _ERR_OBJECT if str(exc) == "not an object" else _json_error_text(exc))
            return
        fix = "\\u" in line and ("\\ud" in line.lower())
        try:
            self._flatten(obj, "", labels, fix)
        except RecursionError:
            # the decoder took a line nearly as deep as the interpreter's guard and the
            # walk (one frame a level, on the hot path) went past it: a line too deep
            labels.set_error(JSON_PARSER_ERR, depth.LINE_TEXT)

    def _flatten(self, pairs, prefix: str, labels, fix: bool) -> None:
        # runs for every key of every line: the collision and first-wins rules of
        # set_parsed are inlined, and each (prefix, key)'s joined and label names are cached
        base_stream, base_sm = labels.stream, labels.sm
        extracted, parsed = labels.extracted, labels.parsed
        for key, value in pairs:
            joined_label = _NAMES.get((prefix, key))
            if joined_label is None:
                joined_label = _names_of(prefix, key)
                if len(_NAMES) < 16384:
                    _NAMES[(prefix, key)] = joined_label
            t = type(value)
            if t is tuple:
                self._flatten(value, joined_label[0], labels, fix)
                continue
            name = joined_label[1]
            if t is list or value is None or not name:
                continue
            if t is bool:
                value = "true" if value else "false"
            elif fix:
                value = fix_surrogates(value)
            # set through the builder: error labels, or a base label named *_extracted (the
            # base is looked at a second time only when the name collided with it)
            if name in base_stream or name in base_sm:
                name += EXTRACTED_SUFFIX
                through_builder = name in base_stream or name in base_sm
            else:
                through_builder = name in _SPECIAL_NAMES
            if name in extracted:
                continue
            extracted.add(name)
            if through_builder:
                labels.set(name, value)
            else:
                parsed[name] = value

    def _process_paths(self, line: str, labels) -> None:
        stripped = line.lstrip(" \t\r\n")
        if not stripped or stripped[0] not in '{["':
            labels.set_error(JSON_PARSER_ERR)
            return
        for name, path in self._paths:
            target = name + EXTRACTED_SUFFIX if labels.base_has(name) else name
            found = json_path_lookup(line, path)
            if found is None:
                if not labels.has(target):
                    labels.set_extracted(target, "")
                continue
            labels.set_extracted(target, found)

    def __repr__(self) -> str:
        return f"JsonParser({self.extractions!r})"


class JsonNumberGate:
    """Drops, before `| json` flattens a line, a line that the numeric filter right after it
    (`| json | status >= 500`) would drop: most lines of such a query are dropped, and the
    flattening of every key was most of their cost.

    Only for a name that no nested key or sanitised key can make (letters and digits: a
    flattened name has a `_`), and only where the answer is certain: the name missing from a
    line without escapes means no label (the filter drops those); a line that holds the name
    once and decodes to an object whose top-level value is a number (or a numeric string)
    is compared here. Anything else (an escape, the name twice, another type, a value Go
    would not parse, a label already set) is left to the parser and the filter.
    """

    __slots__ = ("name", "filter", "_decode")

    def __init__(self, name: str, numeric_filter):
        self.name = name
        self.filter = numeric_filter
        # decodes the whole line (so a line that is not JSON is told apart) but builds only
        # the one value, as a number or a string (any other type fails to decode, and the
        # line goes on): a dict of every key was half of the gate's time
        self._decode = msgspec.json.Decoder(msgspec.defstruct(
            "GatedValue", [("value", int | float | str | None, None)],
            rename={"value": name})).decode

    @staticmethod
    def applies(name: str) -> bool:
        return bool(_GATE_NAME.fullmatch(name))

    def process(self, ts: int, line: str, labels) -> str | None:
        if labels.has(self.name) or self.decides(line):
            return line
        return None

    def decides(self, line: str) -> bool:
        """False when the line is certainly dropped, whatever its stream's labels, provided
        none of them (stream or structured metadata) is called `name`: the query engine
        runs this alone over the lines of such streams before their pipelines."""
        if "\\" in line:
            return True
        seen = line.count(self.name)
        if seen == 0:
            return False
        if seen > 1 or (len(line) > 2 * _GATE_NESTING
                        and line.count("[") + line.count("{") > _GATE_NESTING):
            return True
        try:
            value = self._decode(line).value
        except (msgspec.DecodeError, RecursionError):  # also another type, or past float's range
            return True
        kind = type(value)
        if kind is int:
            if not -_EXACT_INT <= value <= _EXACT_INT:
                return True
            number = float(value)
        elif kind is float:
            if not math.isfinite(value):
                return True
            number = value
        elif kind is str:
            try:
                number = self.filter.convert(value)
            except ValueError:
                return True  # the filter keeps the line with its error
        else:
            return True
        return self.filter.accepts(number)

    def __repr__(self) -> str:
        return f"JsonNumberGate({self.name!r}, {self.filter!r})"


_GATE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_EXACT_INT = 2**53  # a float holds every integer up to here exactly
# brackets past which a line is left to `| json`: its decoder stops at the interpreter's
# guard (a JSONParserErr, and the filter keeps the line) at a depth that depends on where it
# is called from, so the gate does not judge lines anywhere near it
_GATE_NESTING = 256


_PATH_TOKEN = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[\s*(?:(\d+)|"((?:[^"\\]|\\.)*)")\s*\]')


def parse_json_path(expr: str) -> tuple:
    """`a.b["c d"][0]` -> ("a", "b", "c d", 0); PipelineError when malformed."""
    steps: list = []
    pos = 0
    while pos < len(expr):
        m = _PATH_TOKEN.match(expr, pos)
        if m is None:
            raise PipelineError(f"cannot parse expression [{expr}]: syntax error: unexpected character at {pos}")
        if m.group(1) is not None:
            steps.append(m.group(1))
        elif m.group(2) is not None:
            steps.append(int(m.group(2)))
        else:
            steps.append(json.loads('"' + m.group(3) + '"'))
        pos = m.end()
    if not steps:
        raise PipelineError(f"cannot parse expression [{expr}]: syntax error: unexpected $end")
    return tuple(steps)


def _ws(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in " \t\r\n":
        i += 1
    return i


def json_path_lookup(line: str, path: tuple) -> str | None:
    """Value at `path` in the JSON text: strings unescaped, null -> '', anything
    else as its raw source text. None when absent or the text is malformed."""
    try:
        i = _ws(line, 0)
        for step in path:
            if isinstance(step, str):
                if line[i] != "{":
                    return None
                i = _ws(line, i + 1)
                if line[i] == "}":
                    return None
                while True:
                    if line[i] != '"':
                        return None
                    key, i = scanstring(line, i + 1)
                    i = _ws(line, i)
                    if line[i] != ":":
                        return None
                    i = _ws(line, i + 1)
                    if key == step:
                        break
                    _, i = _JSON_TOKENS.raw_decode(line, i)
                    i = _ws(line, i)
                    if line[i] != ",":
                        return None
                    i = _ws(line, i + 1)
            else:
                if line[i] != "[":
                    return None
                i = _ws(line, i + 1)
                if line[i] == "]":
                    return None
                for _ in range(step):
                    _, i = _JSON_TOKENS.raw_decode(line, i)
                    i = _ws(line, i)
                    if line[i] != ",":
                        return None
                    i = _ws(line, i + 1)
        value, end = _JSON_TOKENS.raw_decode(line, i)
    except (ValueError, IndexError, RecursionError):  # RecursionError: a line too deep
        return None
    first = line[i]
    if first == '"':
        return fix_surrogates(value)
    if first == "n":
        return ""
    return line[i:end]


# --------------------------------------------------------------------------- unpack

class UnpackParser:
    """`| unpack`: a packed entry's `_entry` becomes the line, its other string
    members become labels (nothing happens without `_entry`)."""

    __slots__ = ()

    def process(self, ts: int, line: str, labels) -> str | None:
        if not line:
            return line
        if line[0] != "{":
            labels.set_error(JSON_PARSER_ERR, "expecting json object(6), but it is not")
            return line
        try:
            obj = _parse_json_object(line, _JSON_PLAIN)
        except RecursionError:
            labels.set_error(JSON_PARSER_ERR, depth.LINE_TEXT)
            return line
        except Exception as exc:  # noqa: BLE001
            labels.set_error(JSON_PARSER_ERR, _json_error_text(exc))
            return line
        entry = None
        for key, value in obj:
            if key == "_entry" and type(value) is str:
                entry = value
                break
        if entry is None:
            return line
        for key, value in obj:
            if key == "_entry" or type(value) is not str:
                continue
            name = sanitize_key(key)
            if name:
                set_parsed(labels, name, fix_surrogates(value))
        return fix_surrogates(entry)

    def __repr__(self) -> str:
        return "UnpackParser()"
