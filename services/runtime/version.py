"""logstore's own version: the installed package's metadata, or pyproject.toml when run from
a checkout that was never installed."""

from __future__ import annotations

import functools
import importlib.metadata
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@functools.cache
def logstore_version() -> str:
    # a checkout's pyproject first: an editable install elsewhere, or an older install in the
    # same environment, would otherwise name another tree's version
    if PYPROJECT.is_file():
        return tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    try:
        return importlib.metadata.version("logstore")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
