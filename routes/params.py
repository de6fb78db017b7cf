"""Request parameters as Loki reads them: merged query string and form body, timestamps in
four formats, Prometheus durations."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from typing import Callable
from urllib.parse import parse_qsl

from litestar import Request

from logql.gocompat.values import GoParseError, go_atoi, go_parse_float, parse_prom_duration
from routes.errors import PlainError

NS = 10**9
# ASCII digits and no trailing newline, as Go's time.Parse reads it
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z",
    re.ASCII)


class Params:
    """Every value of every parameter, query string first, then the form body (Go ParseForm)."""

    def __init__(self, pairs: list[tuple[str, str]]):
        self._values: dict[str, list[str]] = {}
        for key, value in pairs:
            self._values.setdefault(key, []).append(value)

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._values.get(name)
        return values[0] if values else default

    def getall(self, name: str) -> list[str]:
        return list(self._values.get(name, []))


async def read_params(request: Request) -> Params:
    pairs = parse_qsl(request.url.query or "", keep_blank_values=True)
    if request.method == "POST":
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "application/x-www-form-urlencoded":
            body = await request.body()
            pairs += parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    return Params(pairs)


def parse_duration(text: str) -> int:
    """Prometheus duration (`5m`, `1h30m`, `2d`, `1w`) to ns; ValueError when invalid."""
    return parse_prom_duration(text)


def parse_timestamp(text: str) -> int:
    """Loki's order: float seconds, integer (<= 10 chars seconds, else ns), RFC 3339."""
    if "." in text:
        try:
            value = go_parse_float(text)
        except GoParseError:
            pass
        else:
            if math.isfinite(value):
                secs = math.floor(value)
                millis = round((value - secs) * 1000)
                return secs * NS + millis * 10**6
    try:
        number = go_atoi(text)  # Go's ParseInt(text, 10, 64) takes exactly what Atoi takes
    except GoParseError:
        pass
    else:
        return number * NS if len(text) <= 10 else number
    m = _RFC3339.match(text)
    if m:
        frac = m.group(7) or ""
        zone = m.group(8)
        iso = f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}"
        iso += "+00:00" if zone in ("Z", "z") else zone
        try:
            dt = datetime.fromisoformat(iso)
        except ValueError:
            pass
        else:
            ns = int(dt.timestamp()) * NS
            if frac:
                ns += int((frac[1:] + "000000000")[:9])
            return ns
    raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')


def _param(params: Params, name: str, default: int, parse: Callable[[str], int],
           prefix: str = "") -> int:
    """`default` when absent or empty; a value `parse` refuses is a 400 with its text."""
    text = params.get(name)
    if not text:
        return default
    try:
        return parse(text)
    except ValueError as exc:
        raise PlainError(400, prefix + str(exc)) from None


def timestamp_param(params: Params, name: str, default: int, *, prefixed: bool = True) -> int:
    return _param(params, name, default, parse_timestamp,
                  f"could not parse '{name}' parameter: " if prefixed else "")


def int_param(params: Params, name: str, default: int) -> int:
    """An integer parameter as Loki reads one (Go's strconv.Atoi, its text on a 400)."""
    return _param(params, name, default, go_atoi)


def time_range(params: Params, default_since: int = 3600 * NS) -> tuple[int, int]:
    """(start, end) in ns per §0.5: end defaults to now, start to min(end, now) - since."""
    now = time.time_ns()
    end = timestamp_param(params, "end", now)
    since = default_since
    since_text = params.get("since")
    if since_text:
        try:
            since = parse_duration(since_text)
        except ValueError:
            raise PlainError(400, "could not parse 'since' parameter: not a valid duration "
                                  f'string: "{since_text}"') from None
    start = timestamp_param(params, "start", min(end, now) - since)
    if end < start:
        raise PlainError(400, "end timestamp must not be before or equal to start time")
    return start, end


def step_param(text: str) -> int:
    """A float number of seconds or a Prometheus duration, in ns."""
    try:
        value = go_parse_float(text)
    except GoParseError:
        try:
            return parse_duration(text)
        except ValueError:
            raise PlainError(400, f'cannot parse "{text}" to a valid duration') from None
    if not math.isfinite(value):
        raise PlainError(400, f'cannot parse "{text}" to a valid duration')
    return round(value * NS)
