"""Pretty printer behind ``format_query`` (spec logql.md §9.2).

A node whose canonical text fits in 100 characters prints on one line; longer ones split
over lines with two-space indentation, the way Loki's ``syntax.Prettify`` does. Where Loki's
output would change the query's meaning or not parse again (a dropped empty ``on ()``, a
bare ``without``, the parentheses of a split nested operation), logstore keeps them.
"""

from __future__ import annotations

from logql.syntax import ast as A
from logql.gocompat.format import format_float_f, go_duration_str, go_quote, prom_duration_str
from logql.syntax.parser import parse_expr

MAX_CHARS = 100


def _ind(level: int) -> str:
    return "  " * level


def format_query(text: str) -> str:
    """Parse ``text`` (without the pipeline build-time checks Loki's ``format_query`` skips)
    and return its pretty form. Raises ``ParseError``."""
    return pretty(parse_expr(text, check_stages=False))


def pretty(node, level: int = 0) -> str:
    s = str(node)
    if len(s) <= MAX_CHARS:
        return _ind(level) + s
    t = type(node)
    if t is A.LogQuery:
        return _log_query(node, level)
    if t is A.RangeAggregation:
        return _range_agg(node, level)
    if t is A.VectorAggregation:
        return _vector_agg(node, level)
    if t is A.BinaryOp:
        return (_operand(node.lhs, level + 1) + "\n" + _ind(level) + _op_text(node) + "\n"
                + _operand(node.rhs, level + 1))
    if t is A.LabelReplace:
        args = [pretty(node.expr, level + 1)] + [
            _ind(level + 1) + go_quote(v)
            for v in (node.dst, node.replacement, node.src, node.regex)]
        return "label_replace(\n" + ",\n".join(args) + "\n" + _ind(level) + ")"
    return _ind(level) + s


def _operand(node, level: int) -> str:
    """A binary operand. Loki drops the parentheses of a nested operation that it splits,
    which changes precedence when the text is parsed again; logstore keeps them."""
    if type(node) is A.BinaryOp and len(str(node)) > MAX_CHARS:
        return _ind(level) + "(\n" + pretty(node, level + 1) + "\n" + _ind(level) + ")"
    return pretty(node, level)


def _log_query(node: A.LogQuery, level: int) -> str:
    if not node.stages:
        return _ind(level) + str(node)
    lines = [_ind(level) + str(node.selector)]
    chain: list = []

    def flush():
        if not chain:
            return
        text = " ".join(map(str, chain))
        if len(text) <= MAX_CHARS:
            lines.append(_ind(level + 1) + text)
        else:
            lines.extend(_ind(level + 1) + str(f) for f in chain)
        chain.clear()

    for st in node.stages:
        if type(st) is A.LineFilter:
            chain.append(st)
            continue
        flush()
        if type(st) is A.Decolorize:
            lines.append(str(st))  # Loki prints this stage without indentation
        else:
            lines.append(_ind(level + 1) + str(st))
    flush()
    return "\n".join(lines)


def _log_range(node: A.LogRange, level: int) -> str:
    s = pretty(node.query, level)
    u = node.unwrap
    if u is not None:
        ind = _ind(level + 1)
        if u.conversion:
            s += "\n" + ind + f"| unwrap {u.conversion}({u.label})"
        else:
            s += "\n" + ind + f"| unwrap {u.label}"
        for f in u.post_filters:
            s += "\n" + ind + "| " + str(f)
    s += " [" + prom_duration_str(node.range_ns) + "]"
    if node.offset_ns:
        off = node.offset_ns
        # Prometheus form as Loki prints it; a negative one only lexes in Go's form (the
        # lexer reads "-5d" as minus and a duration).
        s += " offset " + (go_duration_str(off) if off < 0 else prom_duration_str(off))
    return s


def _grouping(g: A.Grouping | None, keep_empty_by: bool = False) -> str:
    if g is None:
        return ""
    if keep_empty_by and not g.labels:
        # "avg_over_time(...) by ()" merges all series, unlike no grouping at all
        return " by ()" if not g.without else " without ()"
    if g.without:
        # Loki prints a bare " without" for an empty list, which does not parse back;
        # keep the parentheses so that format_query output is always a valid query.
        return " without (" + ", ".join(g.labels) + ")"
    return " by (" + ", ".join(g.labels) + ")" if g.labels else ""


def _range_agg(node: A.RangeAggregation, level: int) -> str:
    s = _ind(level) + node.op + "(\n"
    if node.param is not None:
        s += _ind(level + 1) + format_float_f(node.param) + ",\n"
    # Loki prints the range through its own rule even when it would fit on one line: the
    # unwrap on a line of its own, a space before the `[range]`
    s += _log_range(node.log_range, level + 1) + "\n" + _ind(level) + ")"
    return s + _grouping(node.grouping, True)


def _vector_agg(node: A.VectorAggregation, level: int) -> str:
    s = _ind(level) + node.op + _grouping(node.grouping) + "(\n"
    args = []
    if node.param is not None:
        args.append(_ind(level + 1) + str(node.param))
    args.append(pretty(node.expr, level + 1))
    return s + ",\n".join(args) + "\n" + _ind(level) + ")"


def _op_text(node: A.BinaryOp) -> str:
    op = node.op + " bool" if node.bool_modifier else node.op
    m = node.matching
    if m is not None:
        # Loki omits an empty "on ()" here, which changes the meaning (and leaves a bare
        # group_left unparseable); logstore always prints the matching clause.
        op += " " + ("on" if m.on else "ignoring") + " (" + ", ".join(m.labels) + ")"
        # Loki always writes the group modifier after a space, so a one-to-one match ends
        # in a space: `* on (a) `
        op += " " + m.group_text(", ", type(node.rhs) is A.BinaryOp)
    return op
