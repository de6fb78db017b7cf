"""docs/metrics.md names every family /metrics exports, and nothing else."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.helpers import JSON_HEADERS, push_body

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_every_exported_family_is_documented(client):
    r = client.post("/logstore/api/v1/push", headers=JSON_HEADERS,
                    content=push_body({"app": "m"}, [[str(time.time_ns()), "x"]]))
    assert r.status_code == 204
    text = client.get("/metrics").text
    exported = {name: kind for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)}
    assert "logstore_writer_commits_total" in exported or "logstore_writer_commits" in exported
    # the table of the section "Every family" (the other tables name labels and routes)
    table = DOC.read_text().split("\n## Every family\n")[1].split("\n## ")[0]
    documented = dict(re.findall(r"^\| `([a-z_:]+)` \| (\w+) \|", table, re.M))
    assert exported == documented
