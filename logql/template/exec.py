"""Executor of parsed templates (parse.py builds them) and the Go built-ins that need
evaluated arguments in special ways (and/or short-circuit, index, printf, eq...)."""

from __future__ import annotations

from urllib.parse import quote_plus

from logql.gocompat.format import go_quote
from logql.template.funcs import FUNCS, FuncError, format_float_g, go_print, truth, type_name
from logql.template.errors import TemplateExecError
from logql.template.gotime import GoTime

_MISSING = object()


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class ExecError(Exception):
    def __init__(self, node, msg: str):
        super().__init__(msg)
        self.node, self.msg = node, msg


# --------------------------------------------------------------------------- builtins

def _len(x):
    if isinstance(x, str):
        return len(x.encode("utf-8", "surrogatepass"))
    if isinstance(x, (list, dict)):
        return len(x)
    raise FuncError(f"len of type {type_name(x)}")


def _index(root, item, *indices):
    for idx in indices:
        if isinstance(item, dict):
            if not isinstance(idx, str):
                raise FuncError(f"value has type {type_name(idx)}; should be string")
            item = item.get(idx, "" if item is root else None)
        elif isinstance(item, (list, str)):
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise FuncError(f"cannot index slice/array with type {type_name(idx)}")
            if idx < 0 or idx >= len(item):
                raise FuncError(f"index out of range: {idx}")
            item = item[idx] if isinstance(item, list) else ord(item.encode()[idx:idx + 1] or b"\0")
        elif item is None:
            raise FuncError("index of untyped nil")
        else:
            raise FuncError(f"can't index item of type {type_name(item)}")
    return item


def _slice(item, *indices):
    if not isinstance(item, (str, list)):
        raise FuncError(f"can't slice item of type {type_name(item)}")
    if len(indices) > 2:
        raise FuncError("too many slice indexes")
    start = indices[0] if indices else 0
    end = indices[1] if len(indices) > 1 else len(item)
    if not (0 <= start <= end <= len(item)):
        raise FuncError(f"index out of range: {end if end > len(item) else start}")
    return item[start:end]


def _sprint(args) -> str:
    out = []
    prev_string = True
    for i, a in enumerate(args):
        is_string = isinstance(a, str)
        if i > 0 and not is_string and not prev_string:
            out.append(" ")
        out.append(go_print(a, top=False))
        prev_string = is_string
    return "".join(out)


def _sprintln(args) -> str:
    return " ".join(go_print(a, top=False) for a in args) + "\n"


_KIND = {bool: "bool", int: "int", float: "float", str: "string"}


def _basic_kind(v):
    k = _KIND.get(type(v))
    if k is None:
        if v is None:
            return None
        return "other"
    return k


def _eq(a, *rest):
    if not rest:
        raise FuncError("missing argument for comparison")
    ka = _basic_kind(a)
    for b in rest:
        kb = _basic_kind(b)
        if ka is None or kb is None:
            if a is None and b is None:
                return True
            raise FuncError("incompatible types for comparison")
        if ka != kb:
            raise FuncError("incompatible types for comparison")
        if a == b:
            return True
    return False


def _lt(a, b):
    ka, kb = _basic_kind(a), _basic_kind(b)
    if ka in (None, "other", "bool") or kb in (None, "other", "bool"):
        raise FuncError("invalid type for comparison")
    if ka != kb:
        raise FuncError("incompatible types for comparison")
    return a < b


def _html(s: str) -> str:
    return (s.replace("&", "&amp;").replace("'", "&#39;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&#34;").replace("\0", "\ufffd"))


def _js(s: str) -> str:
    out = []
    for ch in s:
        if ch in "\\'\"":
            out.append("\\" + ch)
        elif ch in "<>&=":
            out.append(f"\\u{ord(ch):04X}")
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _fmt_bad(verb: str, v) -> str:
    return f"%!{verb}({type_name(v)}={go_print(v, top=False)})"


def _pad(s: str, width, minus: bool, zero: bool) -> str:
    if width is None or len(s) >= width:
        return s
    if minus:
        return s + " " * (width - len(s))
    if zero:
        sign = s[0] if s[:1] in "+-" else ""
        return sign + "0" * (width - len(s)) + s[len(sign):]
    return " " * (width - len(s)) + s


def _fmt_one(verb: str, v, flags: str, prec) -> str | None:
    if verb == "v":
        if isinstance(v, float) and prec is None:
            return format_float_g(v)
        return go_print(v, top=False)
    if verb == "s":
        if isinstance(v, (str, list, dict, GoTime)) or v is None:
            s = go_print(v, top=False) if v is not None else "%!s(<nil>)"
            return s[:prec] if prec is not None else s
        return None
    if verb == "q":
        return go_quote(v) if isinstance(v, str) else (f"'{chr(v)}'" if type(v) is int else None)
    if verb == "t":
        return ("true" if v else "false") if isinstance(v, bool) else None
    if verb in "dboxXcU":
        if isinstance(v, str) and verb in "xX":
            h = v.encode("utf-8").hex()
            return h.upper() if verb == "X" else h
        if type(v) is not int:
            return None
        if verb == "d":
            s = str(v)
        elif verb == "b":
            s = format(v, "b")
        elif verb == "o":
            s = format(v, "o")
        elif verb == "x":
            s = format(v, "x")
        elif verb == "X":
            s = format(v, "X")
        elif verb == "c":
            return chr(v)
        else:
            return f"U+{v:04X}"
        if "+" in flags and v >= 0:
            s = "+" + s
        return s
    if verb in "eEfFgG":
        if type(v) is int:
            return None
        if not isinstance(v, float):
            return None
        if verb in "gG" and prec is None:
            s = format_float_g(v)
            return s.upper() if verb == "G" else s
        p = 6 if prec is None else prec
        s = format(v, f"{'+' if '+' in flags else ''}.{p}{verb}")
        return s.replace("inf", "Inf").replace("nan", "NaN").replace("INF", "Inf").replace("NAN", "NaN")
    return None


# Go's fmt takes widths and precisions up to 1e6 (tooLarge); past it, the rest of the format
# is read as the number and the verb is missing
_MAX_WIDTH = 1_000_000


def _sprintf(fmt: str, *args) -> str:
    out, ai, i, n = [], 0, 0, len(fmt)
    while i < n:
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        i += 1
        flags = ""
        while i < n and fmt[i] in "+-# 0":
            flags += fmt[i]
            i += 1
        width = prec = None
        j = i
        while i < n and fmt[i].isdigit():
            i += 1
        if i > j:
            width = int(fmt[j:i])
        if i < n and fmt[i] == ".":
            i += 1
            j = i
            while i < n and fmt[i].isdigit():
                i += 1
            prec = int(fmt[j:i]) if i > j else 0
        if (width is not None and width > _MAX_WIDTH) or (prec is not None
                                                           and prec > _MAX_WIDTH):
            i = n  # Go's parsenum gives up on a number this long and eats the format
        if i >= n:
            out.append("%!(NOVERB)")
            break
        verb = fmt[i]
        i += 1
        if verb == "%":
            out.append("%")
            continue
        if ai >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        v = args[ai]
        ai += 1
        s = _fmt_one(verb, v, flags, prec)
        if s is None:
            s = _fmt_bad(verb, v)
        out.append(_pad(s, width, "-" in flags, "0" in flags and verb not in "sqvt"))
    if ai < len(args):
        extra = ", ".join(f"{type_name(a)}={go_print(a, top=False)}" for a in args[ai:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


# (python callable taking evaluated args, params, variadic); `root` bound at call time for index
_BUILTINS = {
    "not": (lambda v: not truth(v), ("any",), None),
    "len": (_len, ("any",), None),
    "slice": (_slice, ("any",), "int"),
    "print": (lambda *a: _sprint(a), (), "any"),
    "println": (lambda *a: _sprintln(a), (), "any"),
    "printf": (_sprintf, ("str",), "any"),
    "eq": (_eq, ("any",), "any"),
    "ne": (lambda a, b: not _eq(a, b), ("any", "any"), None),
    "lt": (_lt, ("any", "any"), None),
    "le": (lambda a, b: _lt(a, b) or _eq(a, b), ("any", "any"), None),
    "gt": (lambda a, b: not (_lt(a, b) or _eq(a, b)), ("any", "any"), None),
    "ge": (lambda a, b: not _lt(a, b), ("any", "any"), None),
    "html": (lambda *a: _html(_sprint(a)), (), "any"),
    "js": (lambda *a: _js(_sprint(a)), (), "any"),
    "urlquery": (lambda *a: quote_plus(_sprint(a), safe=""), (), "any"),
}

_EXPECTED = {"str": "string", "int": "int", "float": "float64", "bool": "bool", "time": "time.Time"}


def _type_ok(v, kind: str) -> bool:
    if kind == "any":
        return True
    if kind == "str":
        return isinstance(v, str)
    if kind == "int":
        return type(v) is int
    if kind == "float":
        return type(v) is float
    if kind == "bool":
        return type(v) is bool
    if kind == "time":
        return isinstance(v, GoTime)
    return False


# --------------------------------------------------------------------------- executor

class Executor:
    def __init__(self, template):
        self.t = template

    def run(self, data: dict, line: str, ts: int) -> str:
        st = _State(data, line, ts, self.t.funcs)
        out: list[str] = []
        try:
            st.walk(data, self.t.nodes, out)
        except ExecError as exc:
            raise TemplateExecError(self._message(exc)) from None
        except RecursionError:
            raise TemplateExecError(f"template: {self.t.name}: exceeded maximum template depth") from None
        return "".join(out)

    def _message(self, exc: ExecError) -> str:
        name = self.t.name
        if exc.node is None:
            return f"template: {name}: {exc.msg}"
        prefix = self.t.text[:exc.node.pos]
        line = prefix.count("\n") + 1
        col = len(prefix[prefix.rfind("\n") + 1:].encode("utf-8", "surrogatepass"))
        return f'template: {name}:{line}:{col}: executing "{name}" at <{exc.node}>: {exc.msg}'


class _State:
    __slots__ = ("root", "line", "ts", "vars", "funcs")

    def __init__(self, data: dict, line: str, ts: int, funcs: dict = FUNCS):
        self.root, self.line, self.ts, self.funcs = data, line, ts, funcs
        self.vars: list[list] = [["$", data]]

    # ------------------------------------------------------------- control flow
    def walk(self, dot, nodes, out: list[str]) -> None:
        for node in nodes:
            k = node.kind
            if k == "text":
                out.append(node.a)
            elif k == "action":
                v = self.eval_pipe(dot, node.a)
                if not node.a.a:
                    out.append(go_print(v))
            elif k in ("if", "with"):
                mark = len(self.vars)
                v = self.eval_pipe(dot, node.a)
                if truth(v):
                    self.walk(v if k == "with" else dot, node.b, out)
                elif node.c is not None:
                    self.walk(dot, node.c, out)
                del self.vars[mark:]
            elif k == "range":
                self.walk_range(dot, node, out)
            elif k == "break":
                raise _Break()
            elif k == "continue":
                raise _Continue()

    def walk_range(self, dot, node, out: list[str]) -> None:
        mark = len(self.vars)
        pipe = node.a
        v = self.eval_pipe(dot, pipe, declare=False)
        if isinstance(v, list):
            items = list(enumerate(v))
        elif isinstance(v, dict):
            items = [(k, v[k]) for k in sorted(v)]
        elif type(v) is int:
            items = [(i, i) for i in range(v)]
        elif v is None:
            items = []
        else:
            raise ExecError(node, f"range can't iterate over {go_print(v, top=False)}")
        if not items:
            if node.c is not None:
                self.walk(dot, node.c, out)
            return
        for key, elem in items:
            if len(pipe.a) == 1:
                self.vars.append([pipe.a[0], elem])
            elif len(pipe.a) == 2:
                self.vars.append([pipe.a[0], key])
                self.vars.append([pipe.a[1], elem])
            try:
                self.walk(elem, node.b, out)
            except _Break:
                del self.vars[mark:]
                break
            except _Continue:
                pass
            del self.vars[mark:]
        del self.vars[mark:]

    # ------------------------------------------------------------- pipelines
    def eval_pipe(self, dot, pipe, declare: bool = True):
        v = _MISSING
        for cmd in pipe.c:
            v = self.eval_cmd(dot, cmd, v)
        if declare:
            for name in pipe.a:
                if pipe.b:  # `$x = v` assigns the innermost existing variable
                    for slot in reversed(self.vars):
                        if slot[0] == name:
                            slot[1] = v
                            break
                else:
                    self.vars.append([name, v])
        return v

    def eval_cmd(self, dot, cmd, final):
        first = cmd.a[0]
        k = first.kind
        if k == "field":
            return self.field_chain(dot, dot, first, first.a, cmd.a, final)
        if k == "chain":
            base = self.eval_arg_value(dot, first.a)
            return self.field_chain(dot, base, first, first.b, cmd.a, final)
        if k == "var":
            v = self.var(first)
            if first.b:
                return self.field_chain(dot, v, first, first.b, cmd.a, final)
            self.not_a_function(cmd.a, final)
            return v
        if k == "ident":
            return self.call(dot, first, cmd.a[1:], final)
        if k == "nil":
            raise ExecError(first, "nil is not a command")
        self.not_a_function(cmd.a, final)
        if k == "pipe":
            return self.eval_pipe(dot, first, declare=False)
        return self.eval_arg_value(dot, first)

    @staticmethod
    def not_a_function(args, final) -> None:
        if len(args) > 1 or final is not _MISSING:
            raise ExecError(args[0], f"can't give argument to non-function {args[0]}")

    def var(self, node):
        for name, value in reversed(self.vars):
            if name == node.a:
                return value
        raise ExecError(node, f"undefined variable: {node.a}")

    def field_chain(self, dot, receiver, node, names, args, final):
        for name in names[:-1]:
            receiver = self.field(node, name, receiver, False)
        has_args = len(args) > 1 or final is not _MISSING
        return self.field(node, names[-1], receiver, has_args)

    def field(self, node, name: str, receiver, has_args: bool):
        if isinstance(receiver, dict):
            if has_args:
                raise ExecError(node, f"{name} is not a method but has arguments")
            if receiver is self.root:
                return receiver.get(name, "")
            return receiver.get(name)
        if receiver is None:
            return None
        raise ExecError(node, f"can't evaluate field {name} in type {type_name(receiver)}")

    # ------------------------------------------------------------- arguments
    def eval_arg_value(self, dot, node):
        """Value of an operand used as a whole value (constants take Go's ideal type)."""
        k = node.kind
        if k == "string":
            return node.a
        if k == "number":
            if node.c and not any(ch in node.b for ch in ".eEpP") or node.b.lower().startswith("0x") \
                    and "p" not in node.b.lower():
                return int(node.a)
            return float(node.a)
        if k == "bool":
            return node.a
        if k == "nil":
            return None
        if k == "dot":
            return dot
        if k == "field":
            return self.field_chain(dot, dot, node, node.a, [node], _MISSING)
        if k == "var":
            v = self.var(node)
            return self.field_chain(dot, v, node, node.b, [node], _MISSING) if node.b else v
        if k == "chain":
            base = self.eval_arg_value(dot, node.a)
            return self.field_chain(dot, base, node, node.b, [node], _MISSING)
        if k == "pipe":
            return self.eval_pipe(dot, node, declare=False)
        if k == "ident":
            return self.call(dot, node, [], _MISSING)
        raise ExecError(node, f"can't handle {node}")

    def eval_arg(self, dot, node, kind: str):
        k = node.kind
        if k in ("string", "number", "bool", "nil") and kind != "any":
            if k == "number":
                if kind == "int" and node.c:
                    return int(node.a)
                if kind == "float":
                    return float(node.a)
                if kind == "int":
                    raise ExecError(node, f"expected integer; found {node}")
            if k == "string" and kind == "str":
                return node.a
            if k == "bool" and kind == "bool":
                return node.a
            if k == "nil":
                raise ExecError(node, f"cannot assign nil to {_EXPECTED[kind]}")
            if kind == "time":
                raise ExecError(node, f"can't handle {node} for arg of type time.Time")
            want = {"str": "string", "int": "integer", "float": "float", "bool": "bool"}[kind]
            raise ExecError(node, f"expected {want}; found {node}")
        v = self.eval_arg_value(dot, node)
        self.check_type(node, v, kind)
        return v

    @staticmethod
    def check_type(node, v, kind: str) -> None:
        if _type_ok(v, kind):
            return
        if v is None:
            raise ExecError(node, f"invalid value; expected {_EXPECTED[kind]}")
        raise ExecError(node, f"wrong type for value; expected {_EXPECTED[kind]}; got {type_name(v)}")

    # ------------------------------------------------------------- calls
    def call(self, dot, ident, arg_nodes, final):
        name = ident.a
        nargs = len(arg_nodes) + (final is not _MISSING)
        if name in ("and", "or"):
            if nargs < 1:
                raise ExecError(ident, f"wrong number of args for {name}: want at least 1 got 0")
            v = None
            for node in arg_nodes:
                v = self.eval_arg(dot, node, "any")
                if truth(v) == (name == "or"):
                    return v
            return final if final is not _MISSING else v
        if name == "__line__" or name == "__timestamp__" or name == "now":
            if nargs:
                raise ExecError(ident, f"wrong number of args for {name}: want 0 got {nargs}")
            if name == "__line__":
                return self.line
            if name == "__timestamp__":
                return GoTime(self.ts)
        if name == "call":
            raise ExecError(ident, "error calling call: call of nil")
        if name == "index":
            fn, params, variadic = (lambda item, *idx: _index(self.root, item, *idx)), ("any",), "any"
        elif name in _BUILTINS:
            fn, params, variadic = _BUILTINS[name]
        else:
            f = self.funcs[name]
            fn, params, variadic = f.fn, f.params, f.variadic
        fixed = len(params)
        if variadic is None and nargs != fixed:
            raise ExecError(ident, f"wrong number of args for {name}: want {fixed} got {nargs}")
        if variadic is not None and nargs < fixed:
            raise ExecError(ident, f"wrong number of args for {name}: want at least {fixed} got {nargs}")
        args = []
        for i, node in enumerate(arg_nodes):
            args.append(self.eval_arg(dot, node, params[i] if i < fixed else variadic))
        if final is not _MISSING:
            kind = params[len(args)] if len(args) < fixed else variadic
            self.check_type(ident, final, kind)
            args.append(final)
        try:
            return fn(*args)
        except FuncError as exc:
            raise ExecError(ident, f"error calling {name}: {exc}") from None
        except (ValueError, TypeError, OverflowError, ArithmeticError, IndexError, KeyError) as exc:
            # a bug-proof net: no template may raise out of a pipeline stage
            raise ExecError(ident, f"error calling {name}: {exc}") from None
