"""Arithmetic and comparison on samples with Go float semantics, shared by constant folding in
the parser and binary operators in the evaluator (Loki: `x / 0` and `x % 0` are NaN)."""

from __future__ import annotations

import math

NAN = float("nan")


def go_pow(x: float, y: float) -> float:
    """Go ``math.Pow`` (Python raises where Go returns Inf/NaN)."""
    odd = y.is_integer() and abs(y) < 2**53 and int(y) % 2 == 1
    try:
        return math.pow(x, y)
    except OverflowError:
        return -math.inf if x < 0 and odd else math.inf
    except (ValueError, ZeroDivisionError):
        if x == 0:
            return -math.inf if odd and math.copysign(1.0, x) < 0 else math.inf
        return NAN


def go_mod(a: float, b: float) -> float:
    """Go ``math.Mod`` with Loki's `x % 0` = NaN."""
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return NAN
    if math.isinf(b):
        return a
    return math.fmod(a, b)


def arith(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return NAN if b == 0 else a / b
    if op == "%":
        return go_mod(a, b)
    if op == "^":
        return go_pow(a, b)
    raise ValueError(f"unsupported binary operator {op}")


def compare(op: str, a: float, b: float) -> bool:
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    raise ValueError(f"unsupported comparison operator {op}")
