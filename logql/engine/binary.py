"""Binary operators between scalars and vectors (spec logql.md §7.6), Prometheus semantics
with Loki's differences (``x / 0`` and ``x % 0`` are NaN).

Vector/vector operations match samples by a signature (all labels, ``on(...)`` labels, or
all but ``ignoring(...)`` labels), one step at a time.
"""

from __future__ import annotations


from logql.syntax import ast as A
from logql.arith import arith, compare
from logql.syntax.ast import CARD_MANY_TO_ONE, CARD_ONE_TO_MANY, CARD_ONE_TO_ONE
from logql.engine.common import LabelKey, Scalar, StepVectors
from logql.errors import QueryError

COMPARISONS = frozenset(("==", "!=", ">", ">=", "<", "<="))
SET_OPS = frozenset(("and", "or", "unless"))


def eval_binary(node: A.BinaryOp, lhs: Scalar | StepVectors,
                rhs: Scalar | StepVectors) -> Scalar | StepVectors:
    op = node.op
    if isinstance(lhs, float) and isinstance(rhs, float):
        if op in COMPARISONS:
            return 1.0 if compare(op, lhs, rhs) else 0.0
        return arith(op, lhs, rhs)
    if op in SET_OPS:
        if isinstance(lhs, float) or isinstance(rhs, float):
            raise QueryError(f"parse error : set operator {op} not allowed in binary "
                                  "scalar expression")
        sig = _signature_fn(node.matching)
        return [_set_op(op, lv, rv, sig) for lv, rv in zip(lhs, rhs)]
    if isinstance(rhs, float):
        return [_vector_scalar(op, vec, rhs, node.bool_modifier, False) for vec in lhs]
    if isinstance(lhs, float):
        return [_vector_scalar(op, vec, lhs, node.bool_modifier, True) for vec in rhs]
    return [_vector_vector(node, lv, rv) for lv, rv in zip(lhs, rhs)]


def _vector_scalar(op: str, vec: dict, scalar: float, bool_mod: bool,
                   scalar_left: bool) -> dict:
    out: dict[LabelKey, float] = {}
    if op in COMPARISONS:
        for key, v in vec.items():
            a, b = (scalar, v) if scalar_left else (v, scalar)
            hit = compare(op, a, b)
            if bool_mod:
                out[key] = 1.0 if hit else 0.0
            elif hit:
                out[key] = v            # the vector's own value, whichever side it is on
        return out
    for key, v in vec.items():
        out[key] = arith(op, scalar, v) if scalar_left else arith(op, v, scalar)
    return out


def _signature_fn(matching: A.VectorMatching | None):
    if matching is None:
        return lambda key: key
    names = frozenset(matching.labels)
    if matching.on:
        return lambda key: tuple(p for p in key if p[0] in names)
    return lambda key: tuple(p for p in key if p[0] not in names)


def _set_op(op: str, lhs: dict, rhs: dict, sig) -> dict:
    if op == "and":
        if not lhs or not rhs:
            return {}
        right = {sig(k) for k in rhs}
        return {k: v for k, v in lhs.items() if sig(k) in right}
    if op == "or":
        left = {sig(k) for k in lhs}
        out = dict(lhs)
        for k, v in rhs.items():
            if sig(k) not in left:
                out[k] = v
        return out
    right = {sig(k) for k in rhs}
    return {k: v for k, v in lhs.items() if sig(k) not in right}


def _vector_vector(node: A.BinaryOp, lhs: dict, rhs: dict) -> dict:
    op = node.op
    matching = node.matching or A.VectorMatching(on=False)
    card = matching.card
    sig = _signature_fn(node.matching)
    swapped = card == CARD_ONE_TO_MANY
    many, one = (rhs, lhs) if swapped else (lhs, rhs)
    one_by_sig: dict[LabelKey, tuple[LabelKey, float]] = {}
    for key, v in one.items():
        s = sig(key)
        if s in one_by_sig:
            side = "left" if swapped else "right"
            raise QueryError(f"found duplicate series on the {side} hand-side;"
                                  "many-to-many matching not allowed: matching labels must be "
                                  "unique on one side")
        one_by_sig[s] = (key, v)
    is_cmp = op in COMPARISONS
    matched: dict[LabelKey, set | None] = {}
    out: dict[LabelKey, float] = {}
    for key, v in many.items():
        s = sig(key)
        other = one_by_sig.get(s)
        if other is None:
            continue
        okey, ov = other
        a, b = (ov, v) if swapped else (v, ov)     # operands in written order
        if is_cmp:
            hit = compare(op, a, b)
            if node.bool_modifier:
                value = 1.0 if hit else 0.0
            elif hit:
                value = a
            else:
                continue
        else:
            value = arith(op, a, b)
        metric = _result_labels(key, okey, matching)
        if card == CARD_ONE_TO_ONE:
            if s in matched:
                raise QueryError("multiple matches for labels: many-to-one matching must "
                                      "be explicit (group_left/group_right)")
            matched[s] = None
        else:
            seen = matched.get(s)
            if seen is None:
                seen = matched[s] = set()
            if metric in seen:
                raise QueryError("multiple matches for labels: grouping labels must "
                                      "ensure unique matches")
            seen.add(metric)
        out[metric] = value
    return out


def _result_labels(many_key: LabelKey, one_key: LabelKey, m: A.VectorMatching) -> LabelKey:
    if m.card == CARD_ONE_TO_ONE:
        names = frozenset(m.labels)
        if m.on:
            return tuple(p for p in many_key if p[0] in names)
        if names:
            return tuple(p for p in many_key if p[0] not in names)
        return many_key
    if not m.include:
        return many_key
    labels = dict(many_key)
    one = dict(one_key)
    for name in m.include:
        v = one.get(name, "")
        if v:
            labels[name] = v
        else:
            labels.pop(name, None)
    return tuple(sorted(labels.items()))


__all__ = ["eval_binary", "arith", "compare", "CARD_MANY_TO_ONE"]
