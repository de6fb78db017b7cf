"""Reading deploy/Containerfile's instructions (Dockerfile syntax) without a container engine."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def words(arguments: str) -> list[str]:
    """An instruction's arguments in exec form (JSON) or shell form."""
    return json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)


def last(insts: list[tuple[str, str]], name: str) -> str:
    return [args for word, args in insts if word == name][-1]
