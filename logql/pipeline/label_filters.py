"""Label filter stages, `| drop`, `| keep` and `| unwrap` (logql.md §5.5, §5.8, §5.9).

Label filters never rewrite the line: `process` returns the line or None.
Typed filters (numeric, duration, bytes) drop lines missing the label and turn
unparsable values into `__error__=LabelFilterErr` instead of raising.
"""

from __future__ import annotations

import operator

from logql.gocompat.filters import IpMatcher, PipelineError
from logql.gocompat.regexp import compile_anchored
from logql.gocompat.values import go_parse_float as parse_go_float, parse_bytes, parse_go_duration
from logql.pipeline.builder import (ERROR, ERROR_DETAILS, LABEL_FILTER_ERR, PRESERVE_ERROR, SAMPLE_EXTRACTION_ERR)

_CMP = {
    "==": operator.eq, "=": operator.eq, "!=": operator.ne,
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}
_STRING_OPS = ("=", "!=", "=~", "!~")
_REGEX_META = set(".[]{}()*+?^$|\\")


def string_matcher(op: str, value: str):
    """Predicate over a label value for `= != =~ !~` (regexes fully anchored)."""
    if op == "=":
        return lambda v: v == value
    if op == "!=":
        return lambda v: v != value
    if op not in ("=~", "!~"):
        raise PipelineError(f"unknown label matcher operator {op!r}")
    regex = compile_anchored(value)  # validates; Go-style error text
    if value in (".*", "(?s:.*)", "(?s).*"):
        pred = (lambda v: "\n" not in v) if value == ".*" else (lambda v: True)
    elif value == ".+":
        pred = lambda v: v != "" and "\n" not in v  # noqa: E731
    elif not any(c in _REGEX_META for c in value.replace("|", "")):
        choices = frozenset(value.split("|"))
        pred = choices.__contains__
    else:
        search = regex.search
        pred = lambda v: search(v) is not None  # noqa: E731
    if op == "=~":
        return pred
    return lambda v: not pred(v)


class StringLabelFilter:
    """`| name op "value"` with op in `= != =~ !~`; a missing label reads as ''."""

    __slots__ = ("name", "op", "value", "_match")

    def __init__(self, name: str, op: str, value: str):
        if op not in _STRING_OPS:
            raise PipelineError(f"unknown string label filter operator {op!r}")
        self.name, self.op, self.value = name, op, value
        self._match = string_matcher(op, value)

    def process(self, ts: int, line: str, labels) -> str | None:
        name = self.name
        if name == ERROR_DETAILS:
            value = ""  # quirk: not visible to label filters (§5.5)
        else:
            value = labels.get(name)
            if value is None:
                value = ""
        return line if self._match(value) else None

    def __repr__(self) -> str:
        return f"StringLabelFilter({self.name!r}, {self.op!r}, {self.value!r})"


class _TypedLabelFilter:
    """Shared logic of numeric / duration / bytes filters."""

    __slots__ = ("name", "op", "value", "_cmp")
    _convert = staticmethod(parse_go_float)

    def __init__(self, name: str, op: str, value):
        if op not in _CMP or op == "=~":
            raise PipelineError(f"unknown comparison operator {op!r}")
        self.name, self.op, self.value = name, ("==" if op == "=" else op), value
        self._cmp = _CMP[op]

    def process(self, ts: int, line: str, labels) -> str | None:
        name = self.name
        if name == ERROR or name == ERROR_DETAILS:
            return None
        raw = labels.get(name)
        if raw is None:
            return None
        try:
            converted = self._convert(raw)
        except ValueError as exc:
            labels.set_error(LABEL_FILTER_ERR, str(exc))
            return line
        return line if self._cmp(converted, self.value) else None

    # the same two steps for a caller that has the value without a label builder
    # (JsonNumberGate); process() stays inlined, it runs for every line
    def convert(self, raw: str):
        """A label value as this filter compares it; ValueError with Go's text if it cannot."""
        return self._convert(raw)

    def accepts(self, converted) -> bool:
        return self._cmp(converted, self.value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.op!r}, {self.value!r})"


class NumericLabelFilter(_TypedLabelFilter):
    """`| name cmp 5.5` (value: float; op in `== = != > >= < <=`)."""

    __slots__ = ()

    def __init__(self, name: str, op: str, value: float):
        super().__init__(name, op, float(value))


class DurationLabelFilter(_TypedLabelFilter):
    """`| name cmp 250ms` -- `value_ns` is the literal in nanoseconds; label
    values are parsed with Go time.ParseDuration."""

    __slots__ = ()
    _convert = staticmethod(parse_go_duration)

    def __init__(self, name: str, op: str, value_ns: int):
        super().__init__(name, op, int(value_ns))


class BytesLabelFilter(_TypedLabelFilter):
    """`| name cmp 10MB` -- `value` is the literal in bytes; label values are
    parsed with humanize.ParseBytes."""

    __slots__ = ()
    _convert = staticmethod(parse_bytes)

    def __init__(self, name: str, op: str, value: int):
        super().__init__(name, op, int(value))


class IpLabelFilter:
    """`| name = ip("P")` / `!=`. Lines that already carry an error are kept."""

    __slots__ = ("name", "op", "pattern", "_ip")

    def __init__(self, name: str, op: str, pattern: str):
        if op not in ("=", "!="):
            raise PipelineError("ip: invalid operation")
        self.name, self.op, self.pattern = name, op, pattern
        self._ip = IpMatcher(pattern)

    def process(self, ts: int, line: str, labels) -> str | None:
        if labels.error is not None:
            return line
        value = labels.get(self.name)
        if value is None:
            return None
        found = self._ip.search_line(value)
        return line if found == (self.op == "=") else None

    def __repr__(self) -> str:
        return f"IpLabelFilter({self.name!r}, {self.op!r}, {self.pattern!r})"


class And:
    """Both sides evaluated (no short-circuit, so both may record errors)."""

    __slots__ = ("left", "right")

    def __init__(self, left, right):
        self.left, self.right = left, right

    def process(self, ts: int, line: str, labels) -> str | None:
        a = self.left.process(ts, line, labels)
        b = self.right.process(ts, line, labels)
        return line if a is not None and b is not None else None

    def __repr__(self) -> str:
        return f"And({self.left!r}, {self.right!r})"


class Or:
    """Left first; right only when left rejects the line."""

    __slots__ = ("left", "right")

    def __init__(self, left, right):
        self.left, self.right = left, right

    def process(self, ts: int, line: str, labels) -> str | None:
        if self.left.process(ts, line, labels) is not None:
            return line
        return line if self.right.process(ts, line, labels) is not None else None

    def __repr__(self) -> str:
        return f"Or({self.left!r}, {self.right!r})"


# --------------------------------------------------------------------------- drop / keep

def _named_matchers(items) -> list[tuple[str, object]]:
    """[(name,), (name, op, value), "name"] -> [(name, predicate or None)]."""
    out = []
    for item in items:
        if isinstance(item, str):
            out.append((item, None))
        elif len(item) == 1 or item[1] is None:
            out.append((item[0], None))
        else:
            name, op, value = item
            if op not in _STRING_OPS:
                raise PipelineError(f"unknown label matcher operator {op!r}")
            out.append((name, string_matcher(op, value)))
    if not out:
        raise PipelineError("drop/keep need at least one label")
    return out


class Drop:
    """`| drop a, b="v", c=~"re"`: items are names or (name, op, value) tuples."""

    __slots__ = ("items", "_matchers")

    def __init__(self, items):
        self.items = list(items)
        self._matchers = _named_matchers(self.items)

    def process(self, ts: int, line: str, labels) -> str | None:
        for name, pred in self._matchers:
            if pred is None:
                labels.delete(name)
                continue
            value = labels.get(name)
            if pred(value if value is not None else ""):
                labels.delete(name)
        return line

    def __repr__(self) -> str:
        return f"Drop({self.items!r})"


_NEVER_KEPT_AWAY = (ERROR, ERROR_DETAILS, PRESERVE_ERROR)


class Keep:
    """`| keep a, b=~"x"`: everything not listed (or whose matcher fails) is
    deleted; error labels always survive."""

    __slots__ = ("items", "_by_name")

    def __init__(self, items):
        self.items = list(items)
        by_name: dict[str, list] = {}
        for name, pred in _named_matchers(self.items):
            by_name.setdefault(name, []).append(pred)
        self._by_name = by_name

    def process(self, ts: int, line: str, labels) -> str | None:
        by_name = self._by_name
        for name, value in labels.template_data().items():
            if name in _NEVER_KEPT_AWAY:
                continue
            preds = by_name.get(name)
            if preds is None:
                labels.delete(name)
            elif not any(p is None or p(value) for p in preds):
                labels.delete(name)
        return line

    def __repr__(self) -> str:
        return f"Keep({self.items!r})"


# --------------------------------------------------------------------------- unwrap

def _duration_seconds(value: str) -> float:
    return parse_go_duration(value) / 1e9


_CONVERSIONS = {
    "": parse_go_float,
    None: parse_go_float,
    "bytes": lambda v: float(parse_bytes(v)),
    "duration": _duration_seconds,
    "duration_seconds": _duration_seconds,
}


class Unwrap:
    """`| unwrap [conv(]label[)] [| post_filter ...]` for metric queries.

    `extract(ts, line, labels)` returns the sample value, or None when the
    entry yields no sample (label absent/empty, or dropped by a post filter).
    A conversion failure gives 0.0 with `__error__=SampleExtractionErr`.
    The unwrapped label is removed from the labels afterwards (series labels
    of an unwrap query do not contain it, §7.4).
    """

    __slots__ = ("label", "conversion", "post_filters", "_convert")

    def __init__(self, label: str, conversion: str = "", post_filters=()):
        if conversion not in _CONVERSIONS:
            raise PipelineError(f"unknown unwrap conversion {conversion!r}")
        self.label = label
        self.conversion = conversion or ""
        self.post_filters = tuple(post_filters)
        self._convert = _CONVERSIONS[conversion]

    def extract(self, ts: int, line: str, labels) -> float | None:
        raw = labels.get(self.label)
        if not raw:
            return None
        try:
            value = self._convert(raw)
        except ValueError as exc:
            labels.set_error(SAMPLE_EXTRACTION_ERR, str(exc))
            value = 0.0
        for f in self.post_filters:
            if f.process(ts, line, labels) is None:
                return None
        labels.delete(self.label)
        return value

    def process(self, ts: int, line: str, labels) -> str | None:
        """Stage form: keeps the line iff a sample is produced (value discarded)."""
        return line if self.extract(ts, line, labels) is not None else None

    def __repr__(self) -> str:
        return f"Unwrap({self.label!r}, {self.conversion!r}, {list(self.post_filters)!r})"


class RequiredLabelValues:
    r"""Drops, before any parser runs, a line that cannot pass a later `name="value"` filter.

    Placed by the compiler only when every stage before that filter is a line filter, a
    json/logfmt/regexp/pattern parser or another label filter: then the label either comes
    from the stream or structured metadata (checked here, and kept), or a parser copies it
    verbatim out of the line, so the value must occur in the line. A backslash in the line
    could hide the value behind an escape (`\u0065rror`): such lines are kept too. The filter
    itself still decides; this only spares the parsers the lines it would reject.
    """

    __slots__ = ("requirements",)

    def __init__(self, requirements: list[tuple[str, str]]):
        self.requirements = tuple(requirements)

    def process(self, ts: int, line: str, labels) -> str | None:
        if "\\" in line:
            return line
        for name, value in self.requirements:
            if value not in line and not labels.has(name):
                return None
        return line

    def __repr__(self) -> str:
        return f"RequiredLabelValues({list(self.requirements)!r})"

