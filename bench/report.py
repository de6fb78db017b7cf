"""bench/REPORT.md is shared by every benchmark: each one owns one `## ` section."""

from __future__ import annotations

import platform
import os
from pathlib import Path

REPORT = Path(__file__).resolve().parent / "REPORT.md"
HEADER = ("# logstore benchmark report\n\n"
          "Each section is written by the script named in its heading; rerun it to refresh.\n")


def machine() -> str:
    return f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}"


def table(headers: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def update_section(title: str, body: str) -> None:
    """Replace (or append) the section headed `## {title}`, leaving the others alone."""
    text = REPORT.read_text() if REPORT.exists() else HEADER
    heading = f"## {title}"
    lines = text.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.rstrip() == heading), None)
    block = f"{heading}\n\n{body.rstrip()}\n\n"
    if start is None:
        text = text.rstrip() + "\n\n" + block
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        text = "".join(lines[:start]) + block + "".join(lines[end:])
    REPORT.write_text(text.rstrip() + "\n")
