"""Line filter stages (`|= != |~ !~ |> !>`, `ip()`), `| decolorize`, and the
substring hints the query planner uses for its FTS5 prefilter (logql.md §5.1, §5.2).

Every filter is compiled once into a plain predicate `match(line) -> bool`;
`process` only wraps it, and `Pipeline` calls `match` directly when a pipeline
is made of line filters only.
"""

from __future__ import annotations

import re
import re._parser as sre_parse  # used only to *derive* required literals, never to match

from logql.gocompat.filters import IpMatcher, PipelineError
from logql.gocompat.regexp import compile_regexp
from logql.model import Needle
from logql.patterns import split_pattern, structure_error

LINE_FILTER_OPS = ("|=", "!=", "|~", "!~", "|>", "!>")
_POSITIVE = {"|=": True, "!=": False, "|~": True, "!~": False, "|>": True, "!>": False}

def _always(line: str) -> bool:
    return True


def _never(line: str) -> bool:
    return False


# --------------------------------------------------------------------------- literal regexps

_REGEX_META = set(".[]{}()*+?^$|\\")


def _regex_literal_alternatives(pattern: str) -> tuple[list[str], bool] | None:
    """If `pattern` is `[(?i)]alt1|alt2...` where every alternative is a plain
    literal, optionally wrapped in `.*` (which an unanchored search can always
    match empty), return (literals, case_insensitive); else None."""
    ci = False
    if pattern.startswith("(?i)"):
        ci = True
        pattern = pattern[4:]
    if any(c in pattern for c in "()[]{}"):
        return None  # keeps every `|` top-level below
    literals: list[str] = []
    for alt in _split_unescaped_bars(pattern):
        while alt.startswith(".*"):
            alt = alt[2:]
        while alt.endswith(".*") and not _escaped_at(alt, len(alt) - 2):
            alt = alt[:-2]
        lit = _unescape_literal(alt)
        if lit is None:
            return None
        literals.append(lit)
    return literals, ci


def _escaped_at(s: str, i: int) -> bool:
    """True when s[i] is preceded by an odd number of backslashes."""
    n = 0
    while i - 1 - n >= 0 and s[i - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def _split_unescaped_bars(s: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            continue
        if s[i] == "|":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(s[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape_literal(s: str) -> str | None:
    out, i = [], 0
    while i < len(s):
        ch = s[i]
        if ch == "\\":
            if i + 1 >= len(s):
                return None
            nxt = s[i + 1]
            if not (nxt.isascii() and not nxt.isalnum()):  # \d, \w, \n ... are not literal text
                return None
            out.append(nxt)
            i += 2
            continue
        if ch in _REGEX_META:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _contains(needle: str):
    def match(line: str) -> bool:
        return needle in line
    return match


def _contains_any(needles: list[str]):
    needles = tuple(needles)

    def match(line: str) -> bool:
        for n in needles:
            if n in line:
                return True
        return False
    return match


def _contains_ci(needles: list[str], regex):
    """Case-insensitive containment. Go's (?i) uses Unicode case folding (`K`
    matches the Kelvin sign), so `lower()` is only exact on ASCII lines; other
    lines go to RE2."""
    lowered = tuple(n.lower() for n in needles)
    search = regex.search

    def match(line: str) -> bool:
        if line.isascii():
            low = line.lower()
            for n in lowered:
                if n in low:
                    return True
            return False
        return search(line) is not None
    return match


def regex_predicate(pattern: str):
    """Compile `|~ pattern` to the cheapest equivalent predicate."""
    regex = compile_regexp(pattern)  # always validate with RE2 (errors are Go-style)
    lits = _regex_literal_alternatives(pattern)
    if lits is not None:
        needles, ci = lits
        if any(n == "" for n in needles):
            return _always
        if not ci:
            return _contains(needles[0]) if len(needles) == 1 else _contains_any(needles)
        if all(n.isascii() for n in needles):
            return _contains_ci(needles, regex)
    search = regex.search
    return lambda line: search(line) is not None


def _regex_required(pattern: str) -> list[list[Needle]] | None:
    """Literals any line matched by `pattern` contains (AND of ORs), or None.

    Derived from Python's regex parser; constructs where Python and Go syntax
    disagree are refused so a wrong needle can never hide a matching line."""
    if any(bad in pattern for bad in ("[:", "{,", "\\Q", "\\p", "\\P", "(?U", "\\C")):
        return None
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001 - any Python-only failure just means "no hint"
        return None
    ci = bool(parsed.state.flags & re.IGNORECASE)
    cnf = _seq_required(parsed, ci)
    return cnf or None


def _seq_required(seq, ci: bool) -> list[list[Needle]]:
    cnf: list[list[Needle]] = []
    run: list[str] = []

    def flush():
        if run:
            cnf.append([("".join(run), ci)])
            run.clear()

    for op, av in seq:
        if op is sre_parse.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is sre_parse.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            sub_ci = (ci or bool(add_flags & re.IGNORECASE)) and not (del_flags & re.IGNORECASE)
            cnf.extend(_seq_required(sub, sub_ci))
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT):
            lo, _hi, sub = av
            if lo >= 1:
                cnf.extend(_seq_required(sub, ci))
        elif op is sre_parse.BRANCH:
            clause: list[Needle] = []
            for alt in av[1]:
                best = _best_needle(_seq_required(alt, ci))
                if best is None:
                    clause = []
                    break
                clause.append(best)
            if clause:
                cnf.append(clause)
    flush()
    return cnf


def _best_needle(cnf: list[list[Needle]]) -> Needle | None:
    singles = [c[0] for c in cnf if len(c) == 1]
    return max(singles, key=lambda n: len(n[0])) if singles else None


# --------------------------------------------------------------------------- pattern filters

def parse_pattern(text: str) -> list[tuple[str, str]]:
    """Split a pattern into ('lit', text) and ('cap', name) elements (`_` = unnamed).

    Raises PipelineError for adjacent captures or duplicate names."""
    pieces = split_pattern(text)
    err = structure_error(pieces)
    if err:
        raise PipelineError(err)
    return [("cap" if is_cap else "lit", t) for is_cap, t in pieces]


def pattern_predicate(text: str):
    """Compile a `|>` pattern into a predicate following Loki's (quirky) matcher."""
    elements = parse_pattern(text)
    for kind, value in elements:
        if kind == "cap" and value != "_":
            raise PipelineError(f"named captures are not allowed: found '<{value}>'")
    if not elements:
        return lambda line: line == ""
    ends_with_literal = elements[-1][0] == "lit"
    steps = tuple((i, value) for i, (kind, value) in enumerate(elements) if kind == "lit")

    def match(line: str) -> bool:
        off = 0
        for i, lit in steps:
            at = line.find(lit, off)
            if at < 0:
                return False
            if i > 0 and at == off:  # the wildcard before this literal would be empty
                return False
            off = at + len(lit)
        if ends_with_literal:
            return off == len(line)
        return off < len(line)

    if len(steps) == 1 and steps[0][0] == 1 and len(elements) == 3:
        # `<_> lit <_>`: the common "contains" pattern, fast path via `find`
        lit = steps[0][1]

        def match_middle(line: str) -> bool:
            at = line.find(lit, 0)
            return at > 0 and at + len(lit) < len(line)
        return match_middle
    return match


def _pattern_literals(text: str) -> list[str]:
    return [v for k, v in parse_pattern(text) if k == "lit" and v]


# --------------------------------------------------------------------------- LineFilter

class LineFilter:
    """One line filter with its or-alternatives: `op v1 or v2 ...`.

    `values` are strings, or ("ip", "<pattern>") tuples / IpMatcher objects for
    `ip("...")` alternatives. All alternatives use `op`. Positive ops keep the
    line when any alternative matches; negative ops when none does.
    Raises PipelineError (regex, pattern, ip errors) at construction.
    """

    __slots__ = ("op", "values", "match")

    def __init__(self, op: str, values):
        if op not in _POSITIVE:
            raise PipelineError(f"unknown line filter operator {op!r}")
        if isinstance(values, (str, tuple, IpMatcher)) and not isinstance(values, list):
            values = [values]
        self.op = op
        self.values = list(values)
        preds = [self._alternative(op, v) for v in self.values]
        any_match = _any(preds)
        if _POSITIVE[op]:
            self.match = any_match
        elif any_match is _always:
            self.match = _never
        elif any_match is _never:
            self.match = _always
        else:
            self.match = lambda line: not any_match(line)

    @staticmethod
    def _alternative(op: str, value):
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "ip":
            value = IpMatcher(value[1])
        if isinstance(value, IpMatcher):
            if op not in ("|=", "!="):
                raise PipelineError("ip: invalid operation")
            return value.search_line
        if op in ("|=", "!="):
            return _always if value == "" else _contains(value)
        if op in ("|~", "!~"):
            return regex_predicate(value)
        return pattern_predicate(value)

    def process(self, ts: int, line: str, labels) -> str | None:
        return line if self.match(line) else None

    def required_substrings(self) -> list[list[Needle]] | None:
        """Substrings every kept line contains, as an AND of ORs:
        `[[("a", False), ("b", False)], [("c", True)]]` means
        (contains "a" or contains "b") and contains "c" ignoring case.
        None when nothing can be derived (negative ops, ip(), rich regexes)."""
        if not _POSITIVE[self.op]:
            return None
        per_alt: list[list[list[Needle]] | None] = []
        for v in self.values:
            if not isinstance(v, str):
                return None
            if self.op == "|=":
                per_alt.append([[(v, False)]] if v else None)
            elif self.op == "|~":
                lits = _regex_literal_alternatives(v)
                if lits is not None and all(lits[0]):
                    per_alt.append([[(n, lits[1]) for n in lits[0]]])
                else:
                    per_alt.append(_regex_required(v))
            else:
                per_alt.append([[(lit, False)] for lit in _pattern_literals(v)] or None)
        if any(a is None for a in per_alt):
            return None
        if len(per_alt) == 1:
            return per_alt[0]
        clause: list[Needle] = []
        for cnf in per_alt:
            if len(cnf) == 1:
                clause.extend(cnf[0])
            else:
                best = _best_needle(cnf)
                if best is None:
                    return None
                clause.append(best)
        return [clause]

    def __repr__(self) -> str:
        return f"LineFilter({self.op!r}, {self.values!r})"


def _any(preds):
    preds = [p for p in preds if p is not _never]
    if not preds:
        return _never
    if any(p is _always for p in preds):
        return _always
    if len(preds) == 1:
        return preds[0]
    preds = tuple(preds)

    def match(line: str) -> bool:
        for p in preds:
            if p(line):
                return True
        return False
    return match


# --------------------------------------------------------------------------- decolorize

# Loki's ANSI escape regexp (§5.2); `\d` spelled [0-9] because Python's `\d`
# is Unicode-aware and Go's is not.
_ANSI = re.compile(
    "[\x1b\x9b][\\[\\]()#;?]*(?:(?:(?:[a-zA-Z0-9]*(?:;[a-zA-Z0-9]*)*)?\x07)"
    "|(?:(?:[0-9]{1,4}(?:;[0-9]{0,4})*)?[0-9A-PRZcf-ntqry=><~]))"
)


class Decolorize:
    """`| decolorize`: strip ANSI escape sequences from the line."""

    __slots__ = ()

    def process(self, ts: int, line: str, labels) -> str | None:
        if "\x1b" not in line and "\x9b" not in line:
            return line
        return _ANSI.sub("", line)

    def __repr__(self) -> str:
        return "Decolorize()"
