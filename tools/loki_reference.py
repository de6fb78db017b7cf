"""Regenerate config/loki_reference.json: every key of Loki 3.x's configuration reference.

    git clone https://github.com/grafana/loki /tmp/loki   # or any clone with its tags
    python tools/loki_reference.py /tmp/loki

Reads docs/sources/shared/configuration.md (docs/sources/configure/_index.md before 3.1) at
the newest patch tag of every v3.x minor release and at the clone's HEAD, and writes the
union of their key trees: a config written for any 3.x release is recognised, including
keys a later release removed. config/reference.py walks the result.

Output: {"refs": [...], "blocks": {name: node}} where "" is the file's root and a node is
  null            a value logstore does not look into (scalar, list of scalars, free map)
  {key: node}     a mapping with these keys
  "name"          the block `name`
  ["list", name]  a list whose items are the block `name`
  ["map", name]   a mapping from any string to the block `name`
and the key "*" in a mapping stands for any key.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

DOC_PATHS = ("docs/sources/shared/configuration.md", "docs/sources/configure/_index.md")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config",
                   "loki_reference.json")

_ENTRY = re.compile(r"^(\s*)\[([A-Za-z0-9_]*): <([^>]*)>.*\]\s*$")
_SQUASH = re.compile(r"^(\s*)\[<([A-Za-z0-9_]+)>\]\s*$")
_INLINE = re.compile(r"^(\s*)([A-Za-z0-9_]+):\s*$")
_LIST = re.compile(r"^list of ([A-Za-z0-9_]+?)s$")
_MAP = re.compile(r"^map of string to ([A-Za-z0-9_]+)$")


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


def release_refs(repo: str) -> list[str]:
    """The newest patch tag of every v3.x minor, then HEAD."""
    newest: dict[int, tuple[int, str]] = {}
    for tag in git(repo, "tag", "--list", "v3.*").split():
        m = re.fullmatch(r"v3\.(\d+)\.(\d+)", tag)
        if m:
            minor, patch = int(m.group(1)), int(m.group(2))
            if minor not in newest or patch > newest[minor][0]:
                newest[minor] = (patch, tag)
    return [newest[m][1] for m in sorted(newest)] + ["HEAD"]


def read_doc(repo: str, ref: str) -> str:
    for path in DOC_PATHS:
        try:
            return git(repo, "show", f"{ref}:{path}")
        except subprocess.CalledProcessError:
            continue
    raise SystemExit(f"no configuration reference at {ref}")


def schema_blocks(doc: str) -> dict[str, list[str]]:
    """Block name -> lines of its YAML schema; "" is the root. Examples in the prose are
    skipped: a schema block holds nothing but comments and entries."""
    blocks: dict[str, list[str]] = {}
    start = doc.index("## Configuration file reference")
    end = doc.find("\n## ", start + 10)
    section = None
    lines = doc[start:end if end > 0 else None].splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("### "):
            title = line[4:].strip()
            section = "" if title.startswith("Supported contents") else title
        elif line.strip() == "```yaml" and section is not None:
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            if all(is_schema_line(x) for x in body):
                blocks.setdefault(section, []).extend(body)
            i = j
        i += 1
    return blocks


def is_schema_line(line: str) -> bool:
    s = line.strip()
    return (not s or s.startswith("#") or bool(_ENTRY.match(line) or _SQUASH.match(line)
                                                or _INLINE.match(line)))


def value_node(kind: str, names: set[str]) -> object:
    if kind in names:
        return kind
    for pattern, tag in ((_LIST, "list"), (_MAP, "map")):
        m = pattern.match(kind)
        if m and m.group(1) in names:
            return [tag, m.group(1)]
    return None


def parse_block(lines: list[str], names: set[str]) -> tuple[dict, list[tuple[dict, str]]]:
    """The key tree of one block, and the (mapping, block) pairs squashed into it."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    squashed: list[tuple[dict, str]] = []
    for line in lines:
        if not line.strip() or line.strip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if m := _ENTRY.match(line):
            # `[: <map of string to X>]`: the mapping's keys are free, its values are X
            parent[m.group(2) or "*"] = value_node(m.group(3), names)
        elif m := _SQUASH.match(line):
            squashed.append((parent, m.group(2)))
        elif m := _INLINE.match(line):
            child = parent.setdefault(m.group(2), {})
            stack.append((indent, child))
    return root, squashed


def parse_doc(doc: str) -> dict[str, dict]:
    raw = schema_blocks(doc)
    names = set(raw)
    blocks, squashes = {}, []
    for name, lines in raw.items():
        blocks[name], found = parse_block(lines, names)
        squashes.extend(found)
    for parent, name in squashes:
        for key, node in blocks[name].items():
            parent.setdefault(key, node)
    return blocks


def merge(a: object, b: object, blocks: dict[str, dict]) -> object:
    """Both versions' keys; where the two disagree on a value's shape, the looser wins."""
    if a == b:
        return a
    if a is None or b is None:
        return None
    if isinstance(a, str) and isinstance(b, str):
        return merge(blocks[a], blocks[b], blocks)
    if isinstance(a, str) and isinstance(b, dict):
        return merge(blocks[a], b, blocks)
    if isinstance(b, str) and isinstance(a, dict):
        return merge(a, blocks[b], blocks)
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for key, node in b.items():
            out[key] = merge(out[key], node, blocks) if key in out else node
        return out
    return None  # a list against a map, or two different item blocks


def main(repo: str) -> None:
    refs = release_refs(repo)
    merged: dict[str, dict] = {}
    for ref in refs:
        blocks = parse_doc(read_doc(repo, ref))
        for name, tree in blocks.items():
            merged[name] = merge(merged[name], tree, {**merged, **blocks}) if name in merged \
                else tree
    described = {ref: ref if ref != "HEAD" else "main@" + git(repo, "rev-parse", "--short=12", ref).strip()
                 for ref in refs}
    with open(OUT, "w", encoding="utf-8") as fh:
        json.dump({"refs": [described[r] for r in refs], "blocks": merged}, fh, indent=1,
                  sort_keys=True)
        fh.write("\n")
    print(f"wrote {os.path.normpath(OUT)} from {', '.join(described.values())}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
