"""Log level detection at ingest (`detected_level`), as Loki 3 does by default.

Runs once per pushed line, so the common paths (a level label on the stream, a line with no
`=` and no `{`) cost one or two C-level string searches.
"""

from __future__ import annotations

import re
from typing import Sequence

import msgspec

try:  # a push's per-line loops in C (_linescan.c): levels here, entries in decode.py,
    # content hashes and tallies in prepare.py; without them the Python code does the same
    from services.ingest import _linescan as linescan
except ImportError:  # pragma: no cover - a build without a C compiler
    linescan = None

_NORMALISED = {
    "trace": "trace", "trc": "trace",
    "debug": "debug", "dbg": "debug",
    "info": "info", "inf": "info", "information": "info",
    "warn": "warn", "wrn": "warn", "warning": "warn",
    "error": "error", "err": "error",
    "critical": "critical",
    "fatal": "fatal",
}

# keyword scan: a whole word, left boundary start or one of ` \t\n[({"'=|`,
# right boundary end or one of ` \t\n[](){}:,!"'=|`; the leftmost such word decides, the
# longer of two words that start at one place first (`error` before `err`). One regular
# expression that starts with the left boundary's class, so the engine skips from
# separator to separator, searched on the line behind a space (for the start): 0.67 us a
# line of the realistic set against 1.4 for a `str.find` per keyword.
_LEFT = " \t\n[({\"'=|"
_RIGHT = " \t\n[](){}:,!\"'=|"
_KEYWORD_LEVEL = {"trace": "trace", "debug": "debug", "fatal": "fatal", "critical": "critical",
                  "error": "error", "err": "error", "warning": "warn", "warn": "warn",
                  "info": "info"}
# the keyword scan's words in the order its alternation tries them, and each one's level
_KEYWORD_WORDS = tuple(sorted(_KEYWORD_LEVEL, key=len, reverse=True))
_KEYWORD_LEVELS = tuple(_KEYWORD_LEVEL[word] for word in _KEYWORD_WORDS)
_KEYWORD = re.compile(
    "[" + re.escape(_LEFT) + "](" + "|".join(_KEYWORD_WORDS) + ")"
    "(?![^" + re.escape(_RIGHT) + "])")
_SEVERITY_NUMBER = [(1, 4, "trace"), (5, 8, "debug"), (9, 12, "info"), (13, 16, "warn"),
                    (17, 20, "error"), (21, 24, "fatal")]
_json_decoder = msgspec.json.Decoder()


def _keyword_level(low: str) -> str:
    return _keyword_found(_KEYWORD.search(" " + low))


def _keyword_found(m: re.Match | None) -> str:
    return _KEYWORD_LEVEL[m.group(1)] if m is not None else "unknown"


def normalise_level(value: str) -> str:
    return _NORMALISED.get(value.lower(), value)


class LevelDetector:
    def __init__(self, fields: list[str]):
        self.fields = list(fields)
        self._fields = frozenset(fields)
        # cheap precheck before the logfmt regex: some `<field>=` must occur at all
        self._logfmt_keys = sorted({f.lower() + "=" for f in fields})
        # logfmt: key=value or key="value", key matched case-insensitively
        names = "|".join(sorted((re.escape(f) for f in fields), key=len, reverse=True))
        self._logfmt = re.compile(
            rf'(?:^|[\s,;])({names})=(?:"([^"]*)"|([^\s"]*))', re.IGNORECASE)
        # The same search for an ASCII line, run on its lowercase form behind one space (for
        # `^`): a pattern that starts with a character class lets the regex engine skip to
        # the next separator instead of trying the alternation at every position, and the
        # precheck is not needed. Lowercasing is position-preserving only for ASCII, and
        # IGNORECASE folds non-ASCII letters that lower() does not, hence the restriction.
        lowered = sorted({f.lower() for f in fields}, key=len, reverse=True)
        self._logfmt_ascii = None
        if all(f.isascii() for f in fields) and lowered:
            self._logfmt_ascii = re.compile(
                r'[\s,;](' + "|".join(re.escape(f) for f in lowered) +
                r')=(?:"([^"]*)"|([^\s"]*))')
        # the C scan does what from_line does for ASCII lines with ASCII field names
        self._native = tuple(lowered) if linescan is not None and \
            all(f.isascii() for f in fields) and len(self.fields) <= 64 else None
        self._native_fields = tuple(self.fields)  # a JSON object's fields, as written

    @property
    def native_args(self) -> tuple | None:
        """What the C scans take after the lines (_linescan.levels, _pushcolumns.pack), or
        None when the Python code scans for these fields."""
        if self._native is None:
            return None
        return (self._native, _NORMALISED, _LEFT, _RIGHT, _KEYWORD_WORDS, _KEYWORD_LEVELS,
                "unknown", self._native_fields)

    def from_labels(self, labels: dict[str, str]) -> str | None:
        if self._fields.isdisjoint(labels):  # most streams: one C-level check, no loop
            return None
        for name in self.fields:
            value = labels.get(name)
            if value:
                return normalise_level(value)
        return None

    def from_metadata(self, metadata: dict[str, str]) -> str | None:
        level = self.from_labels(metadata)
        if level is not None:
            return level
        number = metadata.get("severity_number")
        if number is not None:
            try:
                n = int(number)
            except ValueError:
                return "info"
            for low, high, name in _SEVERITY_NUMBER:
                if low <= n <= high:
                    return name
            return "unknown"
        return None

    def from_line(self, line: str) -> str:
        low = line.lower()
        stripped = line.strip() if "{" in line else line
        if stripped.startswith("{") and stripped.endswith("}"):
            level = self._from_json(stripped)
            if level:
                return normalise_level(level)
        elif "=" not in line:
            pass
        elif self._logfmt_ascii is not None and line.isascii():
            m = self._logfmt_ascii.search(" " + low)
            if m:
                # spans in " " + low are one past those in line
                start, end = m.span(2) if m.start(2) >= 0 else m.span(3)
                if end > start:
                    return normalise_level(line[start - 1:end - 1])
        elif any(key in low for key in self._logfmt_keys):
            m = self._logfmt.search(line)
            if m:
                value = m.group(2) if m.group(2) is not None else m.group(3)
                if value:
                    return normalise_level(value)
        return _keyword_level(low)

    def from_lines(self, lines: Sequence[str]) -> list[str]:
        """from_line() of each line, the same levels for fewer steps: the lines of one
        stream, when all are ASCII and none holds a `{`, are lowercased and checked at once,
        and each is searched in place in the joined text (`pos` at the separator before it,
        a newline where from_line has its space, `endpos` at its end: the same search over
        the same characters). 200,000 logfmt lines: 0.42 s -> 0.28. In C where it can
        (_linescan.levels): about a tenth of that; non-ASCII lines, and JSON objects the C
        parser is not sure msgspec reads as it does, stay here."""
        if self._native is not None:
            found = linescan.levels(lines, *self.native_args)
            if None in found:
                found = [self.from_line(line) if level is None else level
                         for line, level in zip(lines, found)]
            return found
        pattern = self._logfmt_ascii
        if pattern is None or len(lines) < 2:
            return [self.from_line(line) for line in lines]
        text = "\n" + "\n".join(lines)
        if "{" in text or not text.isascii():
            return [self.from_line(line) for line in lines]
        low = text.lower()
        search, keyword = pattern.search, _KEYWORD.search
        out = []
        pos = 0
        for line in lines:
            end = pos + 1 + len(line)
            m = search(low, pos, end)
            if m is not None:
                start, stop = m.span(m.lastindex)  # the quoted value (2) or the bare one (3)
                if stop > start:
                    out.append(_NORMALISED.get(low[start:stop], text[start:stop]))
                    pos = end
                    continue
            # the keyword scan in place too: the newline before the line is its left edge
            out.append(_keyword_found(keyword(low, pos, end)))
            pos = end
        return out

    def _from_json(self, text: str) -> str | None:
        try:
            doc = _json_decoder.decode(text)
        except (msgspec.DecodeError, RecursionError):
            # a line nested past what the decoder descends is data like any other: no
            # level from its fields, the keyword scan decides (the push stores it)
            return None
        if not isinstance(doc, dict):
            return None
        found = self._search(doc, 1)
        return found

    def _search(self, doc: dict, depth: int) -> str | None:
        for name in self.fields:
            value = doc.get(name)
            if isinstance(value, str) and value:
                return value
        if depth < 2:
            for value in doc.values():
                if isinstance(value, dict):
                    found = self._search(value, depth + 1)
                    if found:
                        return found
        return None
