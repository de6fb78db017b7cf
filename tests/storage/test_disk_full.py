"""A full disk (issue 15): SQLite's `max_page_count` stands in for it. Pushes answer 503 with a
clear text, /ready says not ready, reads keep working, nothing acknowledged is lost, and
writes resume by themselves once there is space."""

from __future__ import annotations

import json
import random
import time

from tests.helpers import JSON_HEADERS, PUSH

NOW = time.time_ns()


def push(client, n: int, tag: str):
    # random text: the head stores lines compressed, and 2,000 repeated ones fit in a page
    rnd = random.Random(tag)
    values = [[str(NOW + i), f"{tag} line {i} " + rnd.randbytes(250).hex()] for i in range(n)]
    return client.post(PUSH, content=json.dumps({"streams": [{"stream": {"app": "d"},
                                                               "values": values}]}),
                       headers=JSON_HEADERS)


def lines(client) -> int:
    r = client.get("/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({app="d"}[1h]))', "time": str(NOW + 10**9)})
    assert r.status_code == 200
    return int(r.json()["data"]["result"][0]["value"][1])


def test_disk_full_then_space_again(make_client):
    c = make_client({"storage": {"sealing_enabled": False}})
    db = c.app.state.services.db
    assert push(c, 100, "before").status_code == 204
    pages = c.blocking_portal.call(
        db.write, lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
    c.blocking_portal.call(
        db.write, lambda conn: conn.execute(f"PRAGMA max_page_count = {pages + 2}"))

    r = push(c, 2000, "during")
    assert r.status_code == 503
    assert r.text.startswith("the disk is full, nothing was written: ")
    ready = c.get("/ready")
    assert (ready.status_code, ready.text) == (503, "Ingester not ready: the disk is full, "
                                                    "pushes are refused until there is space "
                                                    "again\n")
    assert lines(c) == 100  # reads work; the refused push left nothing

    c.blocking_portal.call(
        db.write, lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))
    assert push(c, 2000, "after").status_code == 204
    assert c.get("/ready").status_code == 200
    assert lines(c) == 2100
