"""Types and error texts shared by the metric evaluators (`metrics.py`, `range.py`,
`vector.py`, `binary.py` in this package)."""

from __future__ import annotations

from logql.errors import QueryError
from logql.model import label_pairs_string

NS = 10**9

LabelKey = tuple[tuple[str, str], ...]
"""A series' labels as ``(name, value)`` pairs sorted by name: hashable and ordered the way
Prometheus compares label sets."""

Scalar = float
StepVectors = list[dict[LabelKey, float]]
"""One dict per evaluation step: series labels -> value at that step."""


def stream_groups(found: dict[int, tuple[str | None, ...]], names: list[str]
                  ) -> tuple[dict[LabelKey, int], dict[int, int]] | None:
    """(group key -> group number, stream id -> group number) for streams given with their
    values of `names` (Reader.select_stream_groups); None when a stream lacks one of them,
    as its lines' group could then come from structured metadata, line by line."""
    group_keys: dict[LabelKey, int] = {}
    group_of: dict[int, int] = {}
    for sid, values in found.items():
        if None in values:
            return None
        group_of[sid] = group_keys.setdefault(tuple(zip(names, values)), len(group_keys))
    return group_keys, group_of


def labels_string(key: LabelKey) -> str:
    """Prometheus ``labels.String()``: ``{a="1", b="2"}``."""
    return label_pairs_string(key)


def series_limit_error(limit: int) -> QueryError:
    return QueryError(f"maximum number of series ({limit}) reached for a single query; "
                           "consider reducing query cardinality by adding more specific stream "
                           "selectors, reducing the time range, or aggregating results with "
                           "functions like sum(), count() or topk()")


def pipeline_error(error: str, key: LabelKey) -> QueryError:
    return QueryError((
        f"pipeline error: '{error}' for series: '{labels_string(key)}'.\n"
        f"Use a label filter to intentionally skip this error. (e.g | __error__!=\"{error}\").\n"
        "To skip all potential errors you can match empty errors.(e.g __error__=\"\")\n"
        "The label filter can also be specified after unwrap. "
        "(e.g | unwrap latency | __error__=\"\" )"))


def go_regexp_expand(template: str, match) -> str:
    """Go ``Regexp.Expand``: ``$1``, ``${1}``, ``$name``, ``${name}``, ``$$``. A reference to
    a group that does not exist (or did not take part) expands to nothing."""
    out: list[str] = []
    i, n = 0, len(template)
    while i < n:
        j = template.find("$", i)
        if j < 0:
            out.append(template[i:])
            break
        out.append(template[i:j])
        i = j + 1
        if i < n and template[i] == "$":
            out.append("$")
            i += 1
            continue
        name, i2 = _expand_name(template, i)
        if name is None:
            out.append("$")   # malformed reference: Go copies the '$' literally
            continue
        i = i2
        out.append(_group(match, name))
    return "".join(out)


def _expand_name(t: str, i: int) -> tuple[str | None, int]:
    n = len(t)
    if i < n and t[i] == "{":
        end = t.find("}", i + 1)
        if end < 0:
            return None, i
        name = t[i + 1:end]
        if not name or not all(c.isalnum() or c == "_" for c in name):
            return None, i
        return name, end + 1
    j = i
    while j < n and (t[j].isalnum() or t[j] == "_"):
        j += 1
    if j == i:
        return None, i
    return t[i:j], j


def _group(match, name: str) -> str:
    try:
        value = match.group(int(name) if name.isdigit() else name)
    except (IndexError, KeyError, ValueError, TypeError):
        return ""
    return value or ""
