"""The template engine's two failures."""


class TemplateError(ValueError):
    """The template text does not parse (the query answers 400)."""


class TemplateExecError(Exception):
    """Execution failed; the stage records `__error__=TemplateFormatErr`."""
