"""The pattern syntax of `| pattern` and `|>`: literal runs and `<name>` captures (`<_>` is
unnamed). One reading of it for the parser's checks and for the pipeline."""

from __future__ import annotations

import re

_CAPTURE = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")


def split_pattern(p: str) -> list[tuple[bool, str]]:
    """Pattern text -> (is_capture, text) pieces; any `<` not forming `<identifier>` is
    literal, and literal runs are merged."""
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in _CAPTURE.finditer(p):
        if m.start() > pos:
            out.append((False, p[pos:m.start()]))
        out.append((True, m.group(1)))
        pos = m.end()
    if pos < len(p):
        out.append((False, p[pos:]))
    return out


def structure_error(pieces: list[tuple[bool, str]]) -> str | None:
    """Loki's text for two captures in a row or a capture name used twice, else None."""
    seen: set[str] = set()
    for i, (is_cap, name) in enumerate(pieces):
        if not is_cap:
            continue
        if i and pieces[i - 1][0]:
            return (f"found consecutive capture '<{pieces[i - 1][1]}><{name}>': "
                    "invalid expression")
        if name != "_":
            if name in seen:
                return f"duplicate capture name ({name}): invalid expression"
            seen.add(name)
    return None
