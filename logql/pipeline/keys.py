"""Label-key rules shared by every parser stage (logql.md §5.3, §5.4.7): sanitising keys,
the `_extracted` suffix on collisions, first extraction wins."""

from __future__ import annotations

import re
from functools import lru_cache

from logql.pipeline.builder import EXTRACTED_SUFFIX

LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


@lru_cache(maxsize=8192)
def sanitize_key(key: str) -> str:
    """§5.3: trim; '' means skip; leading digit gets '_'; other chars become '_'."""
    key = key.strip()
    if not key:
        return ""
    if key[0] in "0123456789":
        key = "_" + key
    return _NOT_IDENT.sub("_", key)


@lru_cache(maxsize=8192)
def json_segment(key: str) -> str:
    # a path segment: trimmed and sanitised but without the leading-digit rule,
    # which applies to the whole joined name only
    return _NOT_IDENT.sub("_", key.strip())


_SURROGATE = re.compile("[\ud800-\udfff]")


def fix_surrogates(s: str) -> str:
    # Go decodes an unpaired \ud800 escape to U+FFFD; Python keeps a lone
    # surrogate that could not even be encoded as UTF-8 later.
    return _SURROGATE.sub("\ufffd", s)


def set_parsed(labels, key: str, value: str) -> None:
    """Write a parser label with collision suffix and first-extraction-wins."""
    if key in labels.stream or key in labels.sm:
        key += EXTRACTED_SUFFIX
    if key in labels.extracted:
        return
    labels.set_extracted(key, value)
