"""Go `time.Time` values for templates: layout formatting/parsing, `String()`.

Templates see `__timestamp__`, `now`, `toDate`, `unixToTime` results as
`GoTime` (nanoseconds since the epoch + a zone). logstore's "Local" zone is UTC.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ZERO_UNIX_NS = -62135596800 * 1_000_000_000  # 0001-01-01T00:00:00Z, Go's zero Time

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


class GoTime:
    """An instant (unix ns) seen in a zone (tzinfo)."""

    __slots__ = ("ns", "tz")

    def __init__(self, ns: int, tz=UTC):
        self.ns = ns
        self.tz = tz

    @classmethod
    def zero(cls) -> "GoTime":
        return cls(_ZERO_UNIX_NS, UTC)


    def datetime(self) -> datetime:
        return (_EPOCH + timedelta(microseconds=self.ns // 1000)).astimezone(self.tz)

    def unix(self) -> int:
        return self.ns // 1_000_000_000

    def nanosecond(self) -> int:
        return self.ns % 1_000_000_000

    def format(self, layout: str) -> str:
        return format_layout(self, layout)

    def __str__(self) -> str:
        # Go Time.String(): "2006-01-02 15:04:05.999999999 -0700 MST"
        return self.format("2006-01-02 15:04:05.999999999 -0700 MST")

    def __eq__(self, other) -> bool:
        return isinstance(other, GoTime) and self.ns == other.ns

    def __hash__(self) -> int:
        return hash(self.ns)


def _zone_name(dt: datetime) -> str:
    name = dt.tzname()
    if name is None or name.startswith(("UTC+", "UTC-")):
        off = int(dt.utcoffset().total_seconds())
        if name is None and off == 0:
            return "UTC"
        sign = "-" if off < 0 else "+"
        off = abs(off)
        h, m = divmod(off // 60, 60)
        return f"{sign}{h:02d}" + (f"{m:02d}" if m else "")
    return name


# --------------------------------------------------------------------------- layout tokens

def _layout_chunks(layout: str) -> list[tuple[str, str]]:
    """Split a Go layout into ('lit', text) and ('std', code) chunks (nextStdChunk)."""
    out: list[tuple[str, str]] = []
    lit_start = 0
    i = 0
    n = len(layout)

    def emit(code: str, length: int):
        nonlocal i, lit_start
        if i > lit_start:
            out.append(("lit", layout[lit_start:i]))
        out.append(("std", code))
        i += length
        lit_start = i

    while i < n:
        c = layout[i]
        rest = layout[i:]
        if c == "J" and rest.startswith("Jan"):
            if rest.startswith("January"):
                emit("January", 7)
                continue
            if not (len(rest) > 3 and rest[3].islower()):
                emit("Jan", 3)
                continue
        elif c == "M" and rest.startswith("Mon"):
            if rest.startswith("Monday"):
                emit("Monday", 6)
                continue
            if not (len(rest) > 3 and rest[3].islower()):
                emit("Mon", 3)
                continue
        elif c == "M" and rest.startswith("MST"):
            emit("MST", 3)
            continue
        elif c == "0" and len(rest) >= 2 and "1" <= rest[1] <= "6":
            emit("0" + rest[1], 2)
            continue
        elif c == "0" and rest.startswith("002"):
            emit("002", 3)
            continue
        elif c == "1":
            if rest.startswith("15"):
                emit("15", 2)
            else:
                emit("1", 1)
            continue
        elif c == "2":
            if rest.startswith("2006"):
                emit("2006", 4)
            else:
                emit("2", 1)
            continue
        elif c == "_" and rest.startswith("_2"):
            if rest.startswith("_2006"):
                i += 1  # a literal '_' followed by the year
                emit("2006", 4)
            else:
                emit("_2", 2)
            continue
        elif c == "_" and rest.startswith("__2"):
            emit("__2", 3)
            continue
        elif c in "345":
            emit(c, 1)
            continue
        elif c == "P" and rest.startswith("PM"):
            emit("PM", 2)
            continue
        elif c == "p" and rest.startswith("pm"):
            emit("pm", 2)
            continue
        elif c in "-Z":
            for code in ("070000", "07:00:00", "0700", "07:00", "07"):
                if rest[1:].startswith(code):
                    emit(c + code, 1 + len(code))
                    break
            else:
                i += 1
            continue
        elif c in ".," and len(rest) > 1 and rest[1] in "09":
            j = 1
            while j < len(rest) and rest[j] == rest[1]:
                j += 1
            if not (j < len(rest) and rest[j].isdigit()):
                emit(c + rest[1:j], j)
                continue
        i += 1
    if lit_start < n:
        out.append(("lit", layout[lit_start:]))
    return out


def format_layout(t: GoTime, layout: str) -> str:
    dt = t.datetime()
    ns = t.nanosecond()
    parts: list[str] = []
    for kind, code in _layout_chunks(layout):
        if kind == "lit":
            parts.append(code)
            continue
        parts.append(_format_std(dt, ns, code))
    return "".join(parts)


def _offset_parts(dt: datetime):
    off = int(dt.utcoffset().total_seconds())
    sign = "-" if off < 0 else "+"
    off = abs(off)
    return off, sign, off // 3600, (off // 60) % 60, off % 60


def _format_std(dt: datetime, ns: int, code: str) -> str:
    if code == "2006":
        return f"{dt.year:04d}"
    if code == "06":
        return f"{dt.year % 100:02d}"
    if code == "January":
        return _MONTHS[dt.month - 1]
    if code == "Jan":
        return _MONTHS[dt.month - 1][:3]
    if code == "01":
        return f"{dt.month:02d}"
    if code == "1":
        return str(dt.month)
    if code == "Monday":
        return _DAYS[dt.weekday()]
    if code == "Mon":
        return _DAYS[dt.weekday()][:3]
    if code == "02":
        return f"{dt.day:02d}"
    if code == "2":
        return str(dt.day)
    if code == "_2":
        return f"{dt.day:2d}"
    if code == "002":
        return f"{dt.timetuple().tm_yday:03d}"
    if code == "__2":
        return f"{dt.timetuple().tm_yday:3d}"
    if code == "15":
        return f"{dt.hour:02d}"
    if code in ("3", "03"):
        h = dt.hour % 12 or 12
        return str(h) if code == "3" else f"{h:02d}"
    if code in ("4", "04"):
        return str(dt.minute) if code == "4" else f"{dt.minute:02d}"
    if code in ("5", "05"):
        return str(dt.second) if code == "5" else f"{dt.second:02d}"
    if code == "PM":
        return "PM" if dt.hour >= 12 else "AM"
    if code == "pm":
        return "pm" if dt.hour >= 12 else "am"
    if code == "MST":
        return _zone_name(dt)
    if code[0] in "-Z":
        off, sign, h, m, s = _offset_parts(dt)
        if code[0] == "Z" and off == 0:
            return "Z"
        body = code[1:]
        if body == "07":
            return f"{sign}{h:02d}"
        if body == "0700":
            return f"{sign}{h:02d}{m:02d}"
        if body == "07:00":
            return f"{sign}{h:02d}:{m:02d}"
        if body == "070000":
            return f"{sign}{h:02d}{m:02d}{s:02d}"
        return f"{sign}{h:02d}:{m:02d}:{s:02d}"
    if code[0] in ".,":
        digits = len(code) - 1
        frac = f"{ns:09d}"[:digits]
        if code[1] == "9":
            frac = frac.rstrip("0")
            return (code[0] + frac) if frac else ""
        return code[0] + frac
    return code


# --------------------------------------------------------------------------- parsing

_STD_PATTERNS = {
    "2006": r"(?P<year>\d{4})", "06": r"(?P<year2>\d{2})",
    "January": "(?P<monthname>" + "|".join(_MONTHS) + ")",
    "Jan": "(?P<monthabbr>" + "|".join(m[:3] for m in _MONTHS) + ")",
    "01": r"(?P<month>\d{2})", "1": r"(?P<month>\d{1,2})",
    "Monday": "(?:" + "|".join(_DAYS) + ")", "Mon": "(?:" + "|".join(d[:3] for d in _DAYS) + ")",
    "02": r"(?P<day>\d{2})", "2": r"(?P<day>\d{1,2})", "_2": r" ?(?P<day>\d{1,2})",
    "002": r"(?P<yday>\d{3})", "__2": r" {0,2}(?P<yday>\d{1,3})",
    "15": r"(?P<hour>\d{1,2})", "03": r"(?P<hour12>\d{2})", "3": r"(?P<hour12>\d{1,2})",
    "04": r"(?P<minute>\d{2})", "4": r"(?P<minute>\d{1,2})",
    "05": r"(?P<second>\d{2})", "5": r"(?P<second>\d{1,2})",
    "PM": r"(?P<ampm>AM|PM)", "pm": r"(?P<ampm>am|pm)",
    "MST": r"(?P<zonename>[A-Z]{3,5}|[+-]\d{2,4})",
}


def _parse_regex(layout: str):
    parts: list[str] = []
    used: set[str] = set()
    for kind, code in _layout_chunks(layout):
        if kind == "lit":
            parts.append(re.escape(code))
            continue
        if code in _STD_PATTERNS:
            pat = _STD_PATTERNS[code]
        elif code[0] in "-Z":
            z = "Z|" if code[0] == "Z" else ""
            body = {"07": r"[+-]\d{2}", "0700": r"[+-]\d{4}", "07:00": r"[+-]\d{2}:\d{2}",
                    "070000": r"[+-]\d{6}", "07:00:00": r"[+-]\d{2}:\d{2}:\d{2}"}[code[1:]]
            pat = f"(?P<offset>{z}{body})"
        else:  # fractional seconds
            pat = r"(?:[.,](?P<frac>\d+))?" if code[1] == "9" else r"[.,](?P<frac>\d{%d})" % (len(code) - 1)
        names = re.findall(r"\?P<(\w+)>", pat)
        if any(name in used for name in names):
            pat = re.sub(r"\?P<\w+>", "?:", pat)  # Go uses the last; we keep the first occurrence
        used.update(names)
        parts.append(pat)
        if code in ("05", "5") and "frac2" not in used:
            # Go accepts a fractional second after seconds even when the layout has none
            parts.append(r"(?:[.,](?P<frac2>\d+))?")
            used.add("frac2")
    return re.compile("".join(parts))


def parse_layout(layout: str, value: str, tz=UTC) -> GoTime:
    """Go time.ParseInLocation (common layouts); ValueError when it fails."""
    m = _parse_regex(layout).fullmatch(value)
    if m is None:
        raise ValueError(f'parsing time "{value}" as "{layout}": cannot parse')
    g = m.groupdict()
    year = int(g["year"]) if g.get("year") else (
        (int(g["year2"]) + (1900 if int(g["year2"]) >= 69 else 2000)) if g.get("year2") else 0)
    if g.get("month"):
        month = int(g["month"])
    elif g.get("monthname"):
        month = _MONTHS.index(g["monthname"]) + 1
    elif g.get("monthabbr"):
        month = [x[:3] for x in _MONTHS].index(g["monthabbr"]) + 1
    else:
        month = 1
    day = int(g["day"]) if g.get("day") else 1
    hour = int(g["hour"]) if g.get("hour") else 0
    if g.get("hour12"):
        hour = int(g["hour12"]) % 12
        if g.get("ampm") in ("PM", "pm"):
            hour += 12
    minute = int(g["minute"]) if g.get("minute") else 0
    second = int(g["second"]) if g.get("second") else 0
    frac = g.get("frac") or g.get("frac2") or ""
    nanos = int((frac + "000000000")[:9]) if frac else 0
    zone = tz
    off = g.get("offset")
    if off and off != "Z":
        sign = -1 if off[0] == "-" else 1
        digits = off[1:].replace(":", "")
        secs = int(digits[0:2]) * 3600 + int(digits[2:4] or 0) * 60 + int(digits[4:6] or 0)
        zone = timezone(timedelta(seconds=sign * secs))
    elif off == "Z" or g.get("zonename") == "UTC":
        zone = UTC
    try:
        if year == 0:
            dt = datetime(1, month, day, hour, minute, second, tzinfo=zone) - timedelta(days=366)
            raise ValueError("year 0 is not representable")
        dt = datetime(year, month, day, hour, minute, second, tzinfo=zone)
    except (ValueError, OverflowError):
        raise ValueError(f'parsing time "{value}": day out of range') from None
    delta = dt - _EPOCH
    ns = (delta.days * 86400 + delta.seconds) * 1_000_000_000 + nanos
    return GoTime(ns, zone)


def load_zone(name: str):
    """IANA zone by name; "Local"/"UTC"/"" are UTC; unknown names give None."""
    if name in ("", "UTC", "Local"):
        return UTC
    try:
        return ZoneInfo(name)
    except Exception:  # noqa: BLE001 - bad zone names fall back in the caller
        return None
