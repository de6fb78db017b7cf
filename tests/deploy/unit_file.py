"""Reading deploy/logstore.service the way systemd does: a key may repeat, later lines add."""

from __future__ import annotations

import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
UNIT = ROOT / "deploy" / "logstore.service"


def unit_settings(text: str) -> dict[str, list[str]]:
    """`Section.Key` -> its values in order (comments and blank lines skipped)."""
    out: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return out


def exec_start() -> list[str]:
    (line,) = unit_settings(UNIT.read_text())["Service.ExecStart"]
    return shlex.split(line)
