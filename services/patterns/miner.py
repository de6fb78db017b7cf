"""Message templates mined from log lines, Drain-style, for the patterns API.

A line is cut into tokens at whitespace and punctuation; tokens that carry values become
variables: anything with a digit, host:port, dotted names (a.b.c), paths, long hex, day and
month names. Runs of variables joined by value punctuation (`10:05:07`, `1.2.3`) are one
variable, units after a value (`3 sec`, `1.2 KB`) belong to it, and a bracketed detail made
only of values (`(1.13 KB)`) is optional. Lines with the same number of tokens and the same
first token are compared word by word (variables and punctuation do not count): at 70% of
the words the same they share a template, whose differing positions become variables;
lines of five words or fewer must agree on every word (`VM Started` is not `VM Paused`).

Each template prints as a Loki pattern, `<_>` for the variables, in the spacing of the line
that started it, so that it works as a `|>` line filter. (Measured against the loghub ground
truth in bench/patterns.py; the heuristics were tuned on those 16 sets, see the README.)"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VAR = "<*>"
SIMILARITY = 0.7
SHORT_WORDS = 5
_TOKEN = re.compile(r"(?P<hostport>(?<![\w.-])[A-Za-z][\w-]*(?:\.[\w-]+)+:\d+\b)"
                    r"|(?P<punct>[=,;:()\[\]{}|\"'>])|(?P<word>[^\s=,;:()\[\]{}|\"'>]+)")
_DIGIT = re.compile(r"\d")
_DOMAIN = re.compile(r"^[\w-]+(\.[\w-]+){2,}$")
_PATH = re.compile(r"^(/[^/\s]*){2,}/?$|^[A-Za-z]:\\")
_HEX = re.compile(r"^(0x)?[0-9a-fA-F]{8,}$")
_DATE_WORDS = frozenset("Mon Tue Wed Thu Fri Sat Sun Jan Feb Mar Apr May Jun Jul Aug Sep Oct "
                        "Nov Dec".split())
_UNITS = frozenset({"sec", "secs", "ms", "KB", "MB", "GB", "TB", "kB", "kb", "mb", "gb"})
_JOIN = frozenset({":", ".", "-", "/", ","})


@dataclass
class Token:
    text: str     # VAR for a value
    start: int
    end: int


def _is_value(piece: str) -> bool:
    return bool(_DIGIT.search(piece) or _DOMAIN.match(piece) or _PATH.match(piece)
                or _HEX.match(piece) or piece in _DATE_WORDS)


def tokenize(line: str) -> list[Token]:
    raw: list[Token] = []
    for m in _TOKEN.finditer(line):
        piece = m.group()
        if m.lastgroup == "hostport" or (m.lastgroup == "word" and _is_value(piece)):
            raw.append(Token(VAR, m.start(), m.end()))
            continue
        if piece == ")" and raw and raw[-1].text == "(":
            raw.append(Token(VAR, m.start(), m.start()))  # "()" reads as "(<value>)"
        raw.append(Token(piece, m.start(), m.end()))
    # a bracketed detail made only of values is optional: left out of the tokens
    kept: list[Token] = []
    i = 0
    while i < len(raw):
        if raw[i].text == "(":
            j = i + 1
            while j < len(raw) and raw[j].text != ")" and j - i < 5:
                j += 1
            inner = raw[i + 1:j]
            if (j < len(raw) and raw[j].text == ")" and inner and inner[0].text == VAR
                    and all(t.text == VAR or t.text in _UNITS for t in inner)):
                i = j + 1
                continue
        kept.append(raw[i])
        i += 1
    out: list[Token] = []
    for t in kept:
        if out and out[-1].text == VAR and (t.text == VAR or t.text in _UNITS):
            out[-1] = Token(VAR, out[-1].start, t.end)  # a unit or a value goes with it
            continue
        if (t.text == VAR and len(out) >= 2 and out[-1].text in _JOIN
                and out[-2].text == VAR and out[-1].start == out[-2].end
                and t.start == out[-1].end):
            out.pop()
            out[-1] = Token(VAR, out[-1].start, t.end)  # 10:05:07, 1.2.3, a-b
            continue
        out.append(t)
    return out


def _words(tokens: list[str]) -> int:
    return sum(1 for t in tokens if t != VAR and t[:1].isalpha())


def similarity(template: list[str], tokens: list[str]) -> float:
    words = same = 0
    for a, b in zip(template, tokens):
        if (a != VAR and a[:1].isalpha()) or (b != VAR and b[:1].isalpha()):
            words += 1
            same += a == b
    return same / words if words else 1.0


@dataclass
class Cluster:
    id: int
    template: list[str]
    line: str                 # the line that started it: spacing and literal text
    spans: list[tuple[int, int]]
    level: str = "unknown"
    size: int = 0
    # token positions before which some line of the cluster had a left-out detail
    gaps: set[int] = field(default_factory=set)

    def pattern(self) -> str:
        """The template as a Loki pattern (`<_>` for variables), `|>`-ready: text the
        tokens left out becomes part of a variable, and variables never touch."""
        out: list[str] = []
        var = False  # the output ends in <_>

        def emit(text: str, is_var: bool) -> None:
            nonlocal var
            if is_var:
                if not var:
                    out.append("<_>")
                var = True
                return
            if text:
                out.append(text)
                var = False

        pos = 0
        for i, (tok, (start, end)) in enumerate(zip(self.template, self.spans)):
            gap = self.line[pos:start]
            if gap.strip() or i in self.gaps:
                emit("", True)        # a left-out detail, here or in another line
            elif gap and not (var and tok == VAR):
                emit(gap, False)
            emit(self.line[start:end], tok == VAR)
            pos = end
        rest = self.line[pos:]
        if rest.strip() or len(self.template) in self.gaps:
            emit("", True)
        elif rest:
            emit(rest, False)
        # literal "<name>" would read as a capture and patterns cannot escape it: a variable
        text = _CAPTURE_LIKE.sub("<_>", "".join(out))
        while "<_><_>" in text:
            text = text.replace("<_><_>", "<_>")
        return text


@dataclass
class Miner:
    """The templates of one stream."""
    clusters: list[Cluster] = field(default_factory=list)
    next_id: int = 1
    _index: dict[tuple[int, str], list[Cluster]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index_clusters()

    def _index_clusters(self) -> None:
        self._index = {}
        for c in self.clusters:
            self._index.setdefault(_key(c.template), []).append(c)
            self.next_id = max(self.next_id, c.id + 1)

    def learn(self, stored: list[Cluster]) -> None:
        """Take clusters another node's miner stored (new ones, or ones whose template it
        widened) in place of those with their ids, in id order as that miner holds them."""
        ids = {c.id for c in stored}
        kept = [c for c in self.clusters if c.id not in ids]
        self.clusters = sorted(kept + stored, key=lambda c: c.id)
        self._index_clusters()

    def _best(self, texts: list[str]) -> Cluster | None:
        best, score = None, -1.0
        for c in self._index.get(_key(texts), ()):
            s = similarity(c.template, texts)
            if s > score:
                best, score = c, s
        need = SIMILARITY if _words(texts) > SHORT_WORDS else 1.0
        return best if best is not None and score >= need else None

    def forget(self, cluster_ids: set[int]) -> None:
        """Drop these clusters (their counts have all expired); their ids are not given
        again."""
        self.clusters = [c for c in self.clusters if c.id not in cluster_ids]
        for key, bucket in list(self._index.items()):
            kept = [c for c in bucket if c.id not in cluster_ids]
            if kept:
                self._index[key] = kept
            else:
                del self._index[key]

    def match(self, line: str) -> Cluster | None:
        """The cluster the line belongs to, learning nothing from it."""
        return self._best([t.text for t in tokenize(line)])

    def add(self, line: str, level: str = "unknown") -> tuple[Cluster, bool]:
        """The line's cluster, and whether its template changed (or is new)."""
        toks = tokenize(line)
        texts = [t.text for t in toks]
        bucket = self._index.setdefault(_key(texts), [])
        best = self._best(texts)
        gaps = _gaps(line, toks)
        if best is not None:
            merged = [a if a == b else VAR for a, b in zip(best.template, texts)]
            changed = merged != best.template or not gaps <= best.gaps
            best.template = merged
            best.gaps |= gaps
            best.size += 1
            return best, changed
        c = Cluster(self.next_id, texts, line, [(t.start, t.end) for t in toks], level, 1,
                    gaps)
        self.next_id += 1
        bucket.append(c)
        self.clusters.append(c)
        return c, True


_CAPTURE_LIKE = re.compile(r"<(?!_>)[A-Za-z_][A-Za-z0-9_]*>")


def _gaps(line: str, toks: list[Token]) -> set[int]:
    """Positions before which text was left out of the tokens (index len: at the end)."""
    out, pos = set(), 0
    for i, t in enumerate(toks):
        if line[pos:t.start].strip():
            out.add(i)
        pos = t.end
    if line[pos:].strip():
        out.add(len(toks))
    return out


def _key(tokens: list[str]) -> tuple[int, str]:
    return len(tokens), tokens[0] if tokens else ""
