"""Go `text/template` subset for `line_format` / `label_format` (logql.md §8).

    t = Template('{{ .level | upper }}: {{ __line__ }}', name="line")   # TemplateError if invalid
    t.execute(data, line, ts)                                             # TemplateExecError on failure

Parsing happens once, at stage construction; error texts follow Go
(`template: line:1: unclosed action`, `template: line:1:3: executing "line"
at <.x>: ...`). Data is the label map (missing keys give ""), executed with
Go's `missingkey=zero` semantics. Functions live in template_funcs.py.
"""

from __future__ import annotations

from logql.depth import MAX_TEMPLATE_DEPTH, TEMPLATE_TEXT, Nesting, TooDeep
from logql.template.funcs import FUNCS, FuncError, go_print, truth, type_name
from logql.gocompat.format import go_quote
from logql.template.errors import TemplateError, TemplateExecError
from logql.template.exec import Executor
from logql.template.gotime import GoTime


_KEYWORDS = {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}
_SPACE = " \t\r\n"


# --------------------------------------------------------------------------- lexer

class Tok:
    __slots__ = ("kind", "val", "pos")

    def __init__(self, kind: str, val, pos: int):
        self.kind, self.val, self.pos = kind, val, pos

    def __repr__(self) -> str:
        return f"Tok({self.kind},{self.val!r})"


_GO_ESC = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
           '"': '"', "'": "'"}


def _unquote(body: str, quote: str) -> str:
    """Go strconv.Unquote of the text between quotes; ValueError if invalid."""
    out, i, n = [], 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError("invalid syntax")
        e = body[i + 1]
        if e in _GO_ESC and (e != "'" or quote == "'") and (e != '"' or quote == '"'):
            out.append(_GO_ESC[e])
            i += 2
        elif e in "xuU":
            size = {"x": 2, "u": 4, "U": 8}[e]
            out.append(chr(int(body[i + 2:i + 2 + size], 16)) if len(body[i + 2:i + 2 + size]) == size else "")
            if len(body[i + 2:i + 2 + size]) != size:
                raise ValueError("invalid syntax")
            i += 2 + size
        elif e in "01234567":
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            raise ValueError("invalid syntax")
    return "".join(out)


def _scan_number(text: str, i: int) -> int:
    """End of a Go number literal starting at i (sign allowed)."""
    n = len(text)
    j = i
    if j < n and text[j] in "+-":
        j += 1
    digits = "0123456789_"
    if text.startswith(("0x", "0X"), j):
        digits, j = "0123456789abcdefABCDEF_", j + 2
    elif text.startswith(("0o", "0O", "0b", "0B"), j):
        j += 2
    while j < n and text[j] in digits:
        j += 1
    if j < n and text[j] == ".":
        j += 1
        while j < n and text[j] in digits:
            j += 1
    exp = "pP" if "a" in digits else "eE"
    if j < n and text[j] in exp:
        j += 1
        if j < n and text[j] in "+-":
            j += 1
        while j < n and text[j] in "0123456789_":
            j += 1
    return j


def lex(text: str) -> list[Tok]:
    toks: list[Tok] = []
    pos, n = 0, len(text)
    trim_next = False
    while True:
        i = text.find("{{", pos)
        chunk = text[pos:] if i < 0 else text[pos:i]
        if i >= 0 and text.startswith("-", i + 2) and i + 3 < n and text[i + 3] in _SPACE:
            chunk = chunk.rstrip(_SPACE)
            k = i + 4
        else:
            k = i + 2
        if trim_next:
            chunk = chunk.lstrip(_SPACE)
        trim_next = False
        if chunk:
            toks.append(Tok("text", chunk, pos))
        if i < 0:
            toks.append(Tok("eof", None, n))
            return toks
        if text.startswith("/*", k):
            end = text.find("*/", k + 2)
            if end < 0:
                raise _err(text, i, "unclosed comment")
            k = end + 2
            if k + 3 < n + 1 and text[k:k + 1] in tuple(_SPACE) and text.startswith("-}}", k + 1):
                trim_next, pos = True, k + 4
            elif text.startswith("}}", k):
                pos = k + 2
            else:
                raise _err(text, i, "comment ends before closing delimiter")
            continue
        toks.append(Tok("{{", None, i))
        pos, trim_next = _lex_action(text, k, toks)


def _lex_action(text: str, i: int, toks: list[Tok]) -> tuple[int, bool]:
    n = len(text)
    depth = 0
    while True:
        if i < n and text[i] in _SPACE and text.startswith("-}}", i + 1):
            toks.append(Tok("}}", None, i))
            return i + 4, True
        if text.startswith("}}", i):
            if depth:
                raise _err(text, i, "unclosed left paren")
            toks.append(Tok("}}", None, i))
            return i + 2, False
        if i >= n:
            raise _err(text, i, "unclosed action")
        c = text[i]
        if c in _SPACE:
            j = i
            while j < n and text[j] in _SPACE and not text.startswith("-}}", j + 1):
                j += 1
            if j == i:
                j += 1
            toks.append(Tok("space", None, i))
            i = j
        elif c == "=":
            toks.append(Tok("=", None, i))
            i += 1
        elif c == ":":
            if not text.startswith(":=", i):
                raise _err(text, i, "expected :=")
            toks.append(Tok(":=", None, i))
            i += 2
        elif c == "|":
            toks.append(Tok("|", None, i))
            i += 1
        elif c == ",":
            toks.append(Tok(",", None, i))
            i += 1
        elif c == "(":
            depth += 1
            toks.append(Tok("(", None, i))
            i += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise _err(text, i, "unexpected right paren")
            toks.append(Tok(")", None, i))
            i += 1
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                if text[j] == "\\":
                    j += 1
                if j < n and text[j] == "\n":
                    break
                j += 1
            if j >= n or text[j] != c:
                raise _err(text, i, "unterminated quoted string" if c == '"' else "unterminated character constant")
            try:
                val = _unquote(text[i + 1:j], c)
            except ValueError:
                raise _err(text, i, "invalid syntax") from None
            if c == "'":
                if len(val) != 1:
                    raise _err(text, i, f"malformed character constant: {text[i:j + 1]}")
                toks.append(Tok("number", (ord(val), text[i:j + 1], True), i))
            else:
                toks.append(Tok("string", val, i))
            i = j + 1
        elif c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                raise _err(text, i, "unterminated raw quoted string")
            toks.append(Tok("string", text[i + 1:j], i))
            i = j + 1
        elif c == "$":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(Tok("var", text[i:j], i))
            i = j
        elif c == "." and i + 1 < n and text[i + 1].isdigit():
            i = _lex_number(text, i, toks)
        elif c == ".":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(Tok("field", text[i + 1:j], i) if j > i + 1 else Tok("dot", None, i))
            i = j
        elif c.isdigit() or (c in "+-" and i + 1 < n and (text[i + 1].isdigit() or text[i + 1] == ".")):
            i = _lex_number(text, i, toks)
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if word in ("true", "false"):
                toks.append(Tok("bool", word == "true", i))
            elif word == "nil":
                toks.append(Tok("nil", None, i))
            elif word in _KEYWORDS:
                toks.append(Tok("kw", word, i))
            else:
                toks.append(Tok("ident", word, i))
            i = j
        else:
            raise _err(text, i, f"unrecognized character in action: U+{ord(c):04X} {c!r}")


def _lex_number(text: str, i: int, toks: list[Tok]) -> int:
    j = _scan_number(text, i)
    if j < len(text) and (text[j].isalnum() or text[j] in "._"):
        k = j
        while k < len(text) and (text[k].isalnum() or text[k] in "._"):
            k += 1
        raise _err(text, i, f'bad number syntax: "{text[i:k]}"')
    lit = text[i:j]
    clean = lit.replace("_", "")
    try:
        low = clean.lower().lstrip("+-")
        if low.startswith(("0x", "0o", "0b")) and not ("p" in low and low.startswith("0x")):
            value, is_int = int(clean, 0), True
        elif low.startswith("0x"):
            value, is_int = float.fromhex(clean), False
        elif any(ch in low for ch in ".e"):
            value, is_int = float(clean), False
            if value.is_integer():
                is_int = True  # Go: 1e3 and 2.0 are valid integer constants
                value = int(value)
        else:
            value, is_int = int(clean, 10) if not (len(low) > 1 and low[0] == "0") else int(clean, 8), True
    except ValueError:
        raise _err(text, i, f'bad number syntax: "{lit}"') from None
    toks.append(Tok("number", (value, lit, is_int), i))
    return j


_CURRENT_NAME = ["template"]


def _err(text: str, pos: int, msg: str) -> TemplateError:
    line = text.count("\n", 0, pos) + 1
    return TemplateError(f"template: {_CURRENT_NAME[0]}:{line}: {msg}")


# --------------------------------------------------------------------------- AST

class Node:
    __slots__ = ("kind", "pos", "a", "b", "c", "d")

    def __init__(self, kind, pos, a=None, b=None, c=None, d=None):
        self.kind, self.pos, self.a, self.b, self.c, self.d = kind, pos, a, b, c, d

    def __str__(self) -> str:  # Go's Node.String(), used in error contexts
        k = self.kind
        if k == "field":
            return "".join("." + f for f in self.a)
        if k == "var":
            return self.a + "".join("." + f for f in self.b)
        if k == "chain":
            return str(self.a) + "".join("." + f for f in self.b)
        if k == "ident":
            return self.a
        if k == "dot":
            return "."
        if k == "nil":
            return "nil"
        if k == "bool":
            return "true" if self.a else "false"
        if k == "number":
            return self.b
        if k == "string":
            return go_quote(self.a)
        if k == "cmd":
            return " ".join(f"({a})" if a.kind == "pipe" else str(a) for a in self.a)
        if k == "pipe":
            decl = ", ".join(self.a) + (" = " if self.b else " := ") if self.a else ""
            return decl + " | ".join(str(c) for c in self.c)
        return k


# --------------------------------------------------------------------------- parser

class _Parser:
    def __init__(self, text: str, toks: list[Tok], funcs):
        self.text, self.toks, self.i, self.funcs = text, toks, 0, funcs
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        # control bodies and parenthesised pipelines recurse here, in the executor and in
        # the printer: one bound for both, checked as each opens (logql/depth.py)
        self.nesting = Nesting(MAX_TEMPLATE_DEPTH, TEMPLATE_TEXT)

    def enter(self, tok: Tok) -> None:
        try:
            self.nesting.enter()
        except TooDeep:
            raise self.err(TEMPLATE_TEXT, tok.pos) from None

    def err(self, msg: str, pos: int | None = None):
        tok = self.toks[min(self.i, len(self.toks) - 1)]
        return _err(self.text, tok.pos if pos is None else pos, msg)

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def peek(self) -> Tok:
        return self.toks[self.i]

    def next_ns(self) -> Tok:
        t = self.next()
        while t.kind == "space":
            t = self.next()
        return t

    def peek_ns(self) -> Tok:
        j = self.i
        while self.toks[j].kind == "space":
            j += 1
        return self.toks[j]

    def parse(self) -> list:
        nodes, end = self.item_list(top=True)
        return nodes

    def item_list(self, top=False):
        """Nodes until {{end}} / {{else}} (returned as the terminator) or EOF."""
        nodes = []
        while True:
            t = self.next()
            if t.kind == "eof":
                if top:
                    return nodes, None
                raise self.err("unexpected EOF", t.pos)
            if t.kind == "text":
                nodes.append(Node("text", t.pos, t.val))
                continue
            # "{{"
            nt = self.peek_ns()
            if nt.kind == "kw":
                self.next_ns()
                word = nt.val
                if word in ("end", "else"):
                    if top:
                        raise self.err(f"unexpected {{{{{word}}}}}", nt.pos)
                    return nodes, nt
                nodes.append(self.control(word, nt))
                continue
            pipe = self.pipeline("command", decl_ok=True)
            nodes.append(Node("action", t.pos, pipe))

    def control(self, word: str, tok: Tok) -> Node:
        if word in ("break", "continue"):
            if self.range_depth == 0:
                raise self.err(f"{{{{{word}}}}} outside {{{{range}}}}", tok.pos)
            if self.next_ns().kind != "}}":
                raise self.err(f"unexpected token in {{{{{word}}}}}", tok.pos)
            return Node(word, tok.pos)
        if word not in ("if", "range", "with"):
            raise self.err(f"{{{{{word}}}}} is not supported", tok.pos)
        self.enter(tok)
        saved_vars = len(self.vars)
        pipe = self.pipeline(word, decl_ok=True, range_decl=(word == "range"))
        if word == "range":
            self.range_depth += 1
        body, term = self.item_list()
        if word == "range":
            self.range_depth -= 1
        else_body = None
        if term.val == "else":
            nt = self.peek_ns()
            if nt.kind == "kw" and nt.val in ("if", "with") and word in ("if", "with"):
                # `{{else if ...}}` is an if nested in the else branch sharing our {{end}}
                self.next_ns()
                else_body = [self.control(nt.val, nt)]
            else:
                if self.next_ns().kind != "}}":
                    raise self.err("unexpected token in else", term.pos)
                else_body, term2 = self.item_list()
                if term2.val != "end":
                    raise self.err("expected end; found {{else}}", term2.pos)
                if self.next_ns().kind != "}}":
                    raise self.err("unexpected token in end", term2.pos)
        else:
            if self.next_ns().kind != "}}":
                raise self.err("unexpected token in end", term.pos)
        del self.vars[saved_vars:]
        self.nesting.leave()
        return Node(word, tok.pos, pipe, body, else_body)

    def pipeline(self, context: str, decl_ok=False, range_decl=False) -> Node:
        start = self.peek_ns().pos
        decl: list[str] = []
        is_assign = False
        if decl_ok and self.peek_ns().kind == "var":
            j = self.i
            v = self.next_ns()
            nt = self.peek_ns()
            if nt.kind in (":=", "="):
                self.next_ns()
                decl, is_assign = [v.val], nt.kind == "="
            elif nt.kind == "," and range_decl:
                self.next_ns()
                v2 = self.next_ns()
                if v2.kind != "var" or self.next_ns().kind not in (":=", "="):
                    raise self.err("range can only initialize variables")
                decl = [v.val, v2.val]
            else:
                self.i = j
            for name in decl:
                if is_assign and name not in self.vars:
                    raise self.err(f'undefined variable "{name}"')
        cmds = []
        end_kind = ")" if context == "parenthesized pipeline" else "}}"
        while True:
            nt = self.peek_ns()
            if nt.kind == end_kind:
                self.next_ns()
                break
            if nt.kind in ("}}", ")", "eof"):
                if nt.kind == "eof" or end_kind == ")":
                    raise self.err("unclosed left paren" if end_kind == ")" else "unclosed action", nt.pos)
                raise self.err(f"unexpected {self._desc(nt)} in {context}", nt.pos)
            cmds.append(self.command())
            nt = self.peek_ns()
            if nt.kind == "|":
                self.next_ns()
                if self.peek_ns().kind in (end_kind, "|"):
                    raise self.err("missing value for command")
        if not cmds:
            raise self.err(f"missing value for {context}")
        for c in cmds[1:]:
            if c.a[0].kind in ("bool", "dot", "nil", "number", "string"):
                raise self.err(f"non executable command in pipeline stage {cmds.index(c) + 1}")
        if not is_assign:
            self.vars.extend(decl)
        return Node("pipe", start, decl, is_assign, cmds)

    @staticmethod
    def _desc(t: Tok) -> str:
        return {"}}": "\"}}\"", ")": "\")\"", "=": "\"=\"", ":=": "\":=\"", ",": "\",\""}.get(t.kind, t.kind)

    def command(self) -> Node:
        args = []
        pos = self.peek_ns().pos
        while True:
            t = self.peek()
            if t.kind == "space":
                self.next()
                continue
            if t.kind in ("}}", ")", "|", "eof"):
                break
            if args and self.toks[self.i - 1].kind != "space" and t.kind != "(":
                raise self.err(f"unexpected {self._desc(t)} in operand", t.pos)
            args.append(self.operand())
        if not args:
            raise self.err("empty command")
        return Node("cmd", pos, args)

    def operand(self) -> Node:
        t = self.next()
        k = t.kind
        if k == "field":
            names = [t.val]
            while self.peek().kind == "field":
                names.append(self.next().val)
            return Node("field", t.pos, tuple(names))
        if k == "var":
            if t.val not in self.vars:
                raise self.err(f'undefined variable "{t.val}"', t.pos)
            names = []
            while self.peek().kind == "field":
                names.append(self.next().val)
            return Node("var", t.pos, t.val, tuple(names))
        if k == "ident":
            if t.val not in self.funcs:
                raise self.err(f'function "{t.val}" not defined', t.pos)
            node = Node("ident", t.pos, t.val)
        elif k == "dot":
            node = Node("dot", t.pos)
        elif k == "nil":
            node = Node("nil", t.pos)
        elif k == "bool":
            node = Node("bool", t.pos, t.val)
        elif k == "number":
            value, lit, is_int = t.val
            node = Node("number", t.pos, value, lit, is_int)
        elif k == "string":
            node = Node("string", t.pos, t.val)
        elif k == "(":
            self.enter(t)
            node = self.pipeline("parenthesized pipeline")
            self.nesting.leave()
        else:
            raise self.err(f"unexpected {self._desc(t)} in operand", t.pos)
        if self.peek().kind == "field":
            names = []
            while self.peek().kind == "field":
                names.append(self.next().val)
            if node.kind in ("bool", "string", "number", "nil", "ident"):
                raise self.err(f"unexpected . after term {str(node)!r}".replace("'", '"'), t.pos)
            return Node("chain", t.pos, node, tuple(names))
        return node




class Template:
    """A parsed template; `name` is `line` for line_format, `label` for label_format."""

    __slots__ = ("text", "name", "nodes", "funcs", "_fast", "_exec")

    def __init__(self, text: str, name: str = "line", funcs: dict | None = None):
        """`funcs`: the function table (default: LogQL's, sprig's subset)."""
        self.text = text
        self.name = name
        self.funcs = FUNCS if funcs is None else funcs
        _CURRENT_NAME[0] = name
        self.nodes = _Parser(text, lex(text), self.funcs).parse()
        self._fast = self._fast_parts()
        self._exec = Executor(self)

    def _fast_parts(self):
        """Templates made of text and plain `{{.label}}` render with a join."""
        parts = []
        for node in self.nodes:
            if node.kind == "text":
                parts.append((True, node.a))
                continue
            if node.kind != "action":
                return None
            pipe = node.a
            if pipe.a or len(pipe.c) != 1 or len(pipe.c[0].a) != 1:
                return None
            arg = pipe.c[0].a[0]
            if arg.kind != "field" or len(arg.a) != 1:
                return None
            parts.append((False, arg.a[0]))
        return tuple(parts)

    def execute(self, data: dict, line: str = "", ts: int = 0) -> str:
        if self._fast is not None:
            return "".join(v if is_text else data.get(v, "") for is_text, v in self._fast)
        return self._exec.run(data, line, ts)


__all__ = ["Template", "TemplateError", "TemplateExecError", "GoTime", "go_print", "truth", "type_name",
           "FuncError"]
