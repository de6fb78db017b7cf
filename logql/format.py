"""Pretty printer behind ``format_query`` (spec logql.md §9.2).

A node whose canonical text fits in 100 characters prints on one line; longer ones split
over lines with two-space indentation, the way Loki's ``syntax.Prettify`` does.
"""

from __future__ import annotations

from logql import ast as A
from logql.format_go import format_float_f, go_quote, prom_duration_str
from logql.parser import parse_expr

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
    if t is A.LogRange:
        return _log_range(node, level)
    if t is A.RangeAggregation:
        return _range_agg(node, level)
    if t is A.VectorAggregation:
        return _vector_agg(node, level)
    if t is A.BinaryOp:
        return (pretty(node.lhs, level + 1) + "\n" + _ind(level) + _op_text(node) + "\n"
                + pretty(node.rhs, level + 1))
    if t is A.LabelReplace:
        args = [pretty(node.expr, level + 1)] + [
            _ind(level + 1) + go_quote(v)
            for v in (node.dst, node.replacement, node.src, node.regex)]
        return "label_replace(\n" + ",\n".join(args) + "\n" + _ind(level) + ")"
    return _ind(level) + s


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
        s += " offset " + ("-" + prom_duration_str(-off) if off < 0 else prom_duration_str(off))
    return s


def _grouping(g: A.Grouping | None) -> str:
    if g is None:
        return ""
    if g.without:
        return " without (" + ", ".join(g.labels) + ")" if g.labels else " without"
    return " by (" + ", ".join(g.labels) + ")" if g.labels else ""


def _range_agg(node: A.RangeAggregation, level: int) -> str:
    s = _ind(level) + node.op + "(\n"
    if node.param is not None:
        s += _ind(level + 1) + format_float_f(node.param) + ",\n"
    s += pretty(node.log_range, level + 1) + "\n" + _ind(level) + ")"
    return s + _grouping(node.grouping)


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
        if m.labels:
            op += " " + ("on" if m.on else "ignoring") + " (" + ", ".join(m.labels) + ")"
        g = m.group_text()
        if g:
            op += " " + (g.split(" (")[0] + " (" + ", ".join(m.include) + ")"
                         if m.include else g)
    return op
