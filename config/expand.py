"""`-config.expand-env`: environment references in a config file, replaced before the YAML
is parsed, with the forms Loki understands (github.com/drone/envsubst)."""

from __future__ import annotations

import re
from typing import Mapping

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:=default}, ${VAR=default},
# ${VAR:?message}, ${VAR?message}, and $VAR
_REFERENCE = re.compile(
    r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-=?])(?P<arg>[^}]*))?\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)")


class ExpandError(ValueError):
    pass


def expand_env(text: str, env: Mapping[str, str]) -> str:
    """`text` with every reference replaced; an undefined variable without a default is the
    empty string, as in Loki. ${VAR:?message} fails with the message when VAR is unset
    (or empty, with the colon)."""
    def replace(m: re.Match) -> str:
        if m.group("bare"):
            return env.get(m.group("bare"), "")
        name, op, arg = m.group("name"), m.group("op"), m.group("arg") or ""
        value = env.get(name)
        missing = value is None or (op is not None and op.startswith(":") and value == "")
        if op is None or not missing:
            return value or ""
        if op.endswith("?"):
            raise ExpandError(f"{name}: {arg or 'parameter null or not set'}")
        return arg

    return _REFERENCE.sub(replace, text)
