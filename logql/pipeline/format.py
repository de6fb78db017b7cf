"""`| line_format` and `| label_format` stages (logql.md §5.6, §5.7).

Templates are parsed once here; a parse error raises PipelineError with Loki's
text. Execution errors never escape: the entry keeps its old line / label and
gets `__error__=TemplateFormatErr` with Go's error text as details.
"""

from __future__ import annotations

from logql.gocompat.filters import PipelineError
from logql.pipeline.builder import ERROR, TEMPLATE_FORMAT_ERR
from logql.template.parse import Template, TemplateError, TemplateExecError


def _render_fast(parts, labels) -> str:
    # text + {{.name}} only: read labels directly instead of building the map
    get = labels.get
    out = []
    for is_text, v in parts:
        if is_text:
            out.append(v)
        else:
            value = get(v)
            if value is not None:
                out.append(value)
    return "".join(out)


class LineFormat:
    """`| line_format "template"`: the line becomes the rendered template."""

    __slots__ = ("template", "_t")

    def __init__(self, template: str):
        self.template = template
        try:
            self._t = Template(template, "line")
        except TemplateError as exc:
            raise PipelineError(f"invalid line template: {exc}") from None

    def process(self, ts: int, line: str, labels) -> str | None:
        fast = self._t._fast
        if fast is not None:
            return _render_fast(fast, labels)
        try:
            return self._t.execute(labels.template_data(), line, ts)
        except TemplateExecError as exc:
            labels.set_error(TEMPLATE_FORMAT_ERR, str(exc))
            return line

    def __repr__(self) -> str:
        return f"LineFormat({self.template!r})"


class LabelFormat:
    """`| label_format dst=src, dst2="{{...}}"`.

    `items`: list of (dst, value, is_template). is_template False means rename
    (`dst=src`, value is the source label name); True means `value` is a template.
    """

    __slots__ = ("items", "_ops", "_has_template")

    def __init__(self, items):
        self.items = [tuple(i) for i in items]
        seen: set[str] = set()
        ops = []
        for dst, value, is_template in self.items:
            if dst == ERROR:
                raise PipelineError(f"{ERROR} cannot be formatted")
            if dst in seen:
                raise PipelineError(f"multiple label name '{dst}' not allowed in a single format operation")
            seen.add(dst)
            if is_template:
                try:
                    ops.append((dst, Template(value, "label")))
                except TemplateError as exc:
                    raise PipelineError(f"invalid template for label '{dst}': {exc}") from None
            else:
                ops.append((dst, value))
        self._ops = tuple(ops)
        self._has_template = any(isinstance(v, Template) for _, v in ops)

    def process(self, ts: int, line: str, labels) -> str | None:
        data = None
        for dst, op in self._ops:
            if isinstance(op, str):  # rename
                if op == dst:
                    continue
                value = labels.get(op)
                if value is None:
                    continue
                labels.delete(op)
                labels.set_extracted(dst, value)
                continue
            if data is None:  # captured once: later templates see earlier renames only
                data = labels.template_data()
            try:
                value = op.execute(data, line, ts)
            except TemplateExecError as exc:
                labels.set_error(TEMPLATE_FORMAT_ERR, str(exc))
                continue
            labels.set_extracted(dst, value)
        return line

    def __repr__(self) -> str:
        return f"LabelFormat({self.items!r})"
