"""Reads stop when their client goes away.

Loki cancels a query's context when its HTTP client disconnects; without that, a Grafana
panel refreshed ten times leaves ten abandoned queries holding reader threads (and the
GIL) until they finish or time out. For read requests the ASGI messages are pumped by a
task of our own: when the server reports `http.disconnect` before the answer is complete,
the request's task is cancelled, and the querier (services/read/querier.py) stops the read on
its thread at its next statement or deadline check.
"""

from __future__ import annotations

import asyncio
from typing import Any

# POST forms of read endpoints (Loki accepts them as form bodies); pushes and other writes
# are never cancelled half-way: what they commit is committed either way
_READ_POSTS = {"query", "query_range", "series", "labels", "format_query"}

CLIENT_CLOSED = 499  # the status Loki (and nginx) record for a request its client abandoned


def cancellable(scope: Any) -> bool:
    method = scope["method"]
    if method in ("GET", "HEAD"):
        return True
    return method == "POST" and scope["path"].rstrip("/").rsplit("/", 1)[-1] in _READ_POSTS


async def run_until_disconnect(app: Any, scope: Any, receive: Any, send: Any) -> bool:
    """Run the app on a request; True if it was abandoned because the client went away."""
    task = asyncio.current_task()
    assert task is not None
    inbox: asyncio.Queue = asyncio.Queue()
    finished = gone = False

    async def pump() -> None:
        nonlocal gone
        while True:
            message = await receive()
            await inbox.put(message)
            if message["type"] == "http.disconnect":
                if not finished:
                    gone = True
                    task.cancel()
                return

    pumping = asyncio.create_task(pump())
    try:
        await app(scope, inbox.get, send)
    except asyncio.CancelledError:
        if not gone:
            raise
        task.uncancel()
        return True
    finally:
        finished = True
        pumping.cancel()
    return False
