"""Every request but a push sees the pushes answered before it.

Under load a push is answered once it is in the push log, before the batch that holds it is
stored (services/ingest/pending.py). A query, a label list, a delete request or a flush
that arrives after that answer must still find its lines: this wrapper waits, before such a
request, until every record written so far is stored. Nothing waits when nothing is
pending, which is always the case for a store that is not being pushed to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Receive, Scope, Send

    from services.ingest.pending import PendingPushes

# pushes (Loki's, the legacy one, OTLP's) and what must answer while a store is stuck
NOT_WAITING = ("/push", "/v1/logs", "/ready", "/metrics")


def after_pushes(app: ASGIApp, pending: PendingPushes) -> ASGIApp:
    async def settled_first(scope: Scope, receive: Receive, send: Send) -> Any:
        if scope["type"] != "lifespan" and pending.newest_written > pending.applied and \
                not scope["path"].endswith(NOT_WAITING):
            await pending.settled()
        await app(scope, receive, send)
    return settled_first
