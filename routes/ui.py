"""The built-in web page (README "Web page"): `GET /` answers index.html, `GET /ui/<name>` its
modules and stylesheet, all from the `ui` package's static directory, read once when the app
is built (a few tens of kB) so a request never touches the disk and no path from a request
ever names a file.

Every URL in the page is relative (`ui/app.js`, `logstore/api/v1/...`), so it works under a
reverse proxy's sub-path. Nothing answered `GET /` before, so no API client loses an answer.

Caching: every file is `Cache-Control: no-cache` with a strong ETag of its content, answered
304 on a matching If-None-Match. The modules import one another by plain names, so a hash
in the URL would have to be rewritten into every import; revalidating costs one small request
per file and a new version can never run beside a stale module.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath

# Litestar appends "; charset=utf-8" to text/ types
TYPES = {".html": "text/html", ".js": "text/javascript",
         ".css": "text/css", ".svg": "image/svg+xml"}
# the page talks to its own origin only: no CDN, no inline script, nothing from elsewhere
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'")


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def load_assets() -> dict[str, Asset]:
    out = {}
    for entry in (resources.files("ui") / "static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in TYPES:
            body = entry.read_bytes()
            out[entry.name] = Asset(body, TYPES[suffix],
                                    '"' + hashlib.sha256(body).hexdigest()[:20] + '"')
    return out


ASSETS = load_assets()


def _answer(request: Request, asset: Asset) -> Response:
    headers = {"ETag": asset.etag, "Cache-Control": "no-cache",
               "X-Content-Type-Options": "nosniff", "Content-Security-Policy": CSP,
               "Referrer-Policy": "no-referrer"}
    tags = [t.strip() for t in request.headers.get("if-none-match", "").split(",")]
    if asset.etag in tags or "*" in tags:
        return Response(content=b"", status_code=304, headers=headers)
    return Response(content=asset.body, media_type=asset.media_type, headers=headers)


@get("/", include_in_schema=False)
async def index(request: Request) -> Response:
    return _answer(request, ASSETS["index.html"])


@get("/ui/{name:str}", include_in_schema=False)
async def asset(request: Request, name: FromPath[str]) -> Response:
    found = ASSETS.get(name)
    if found is None or name == "index.html":
        return Response(content=f"no such file of the web page: {name}", status_code=404,
                        media_type="text/plain")
    return _answer(request, found)


handlers: list[Any] = [index, asset]
