"""logstore's own log lines, written as Loki writes its: one line per record,
`level=info ts=2026-11-25T13:08:26.674Z caller=app.py:120 msg="..." key=value ...` in logfmt,
or the same keys as one JSON object per line (`server.log_format: json`).

Every module keeps logging through the standard library (`logging.getLogger("logstore...")`);
structlog's ProcessorFormatter turns each record into those keys. The HTTP server's loggers
(granian's `_granian` and `granian.access`) get the same handler through granian's
`log_dictconfig`, in the serve process and in its worker, so one stream holds one format.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

from services.runtime.memory import importing_without

with importing_without():
    import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "error": logging.ERROR}
# Loki's levels are these four; Python's CRITICAL is an error to a reader of Loki's logs
_LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn",
                logging.ERROR: "error", logging.CRITICAL: "error"}

LOGGER = "logstore"


class StderrHandler(logging.StreamHandler):
    """Writes to the sys.stderr of the moment, not the one at creation: a test capturing
    stderr (or anything else that swaps it) sees the lines."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _loki_keys(_logger: Any, _name: str, event_dict: dict) -> dict:
    """level, ts, caller and msg first, in Loki's order and spelling; the record's `extra`
    values (added before this by ExtraAdder) after them."""
    record: logging.LogRecord = event_dict.pop("_record")
    event_dict.pop("_from_structlog", None)
    ts = (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
          + f".{int(record.msecs):03d}Z")
    out = {
        "level": _LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
        "ts": ts,
        "caller": f"{record.filename}:{record.lineno}",
        "msg": event_dict.pop("event"),
    }
    out.update(event_dict)
    return out


def _logfmt_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    # go-logfmt's rule: a value with a space, a control character, `=` or `"` is quoted;
    # JSON's string escapes are what logfmt readers (Loki's and logstore's `| logfmt`) decode
    if any(c <= " " or c in '="' for c in text):
        return json.dumps(text, ensure_ascii=False)
    return text


def render_logfmt(_logger: Any, _name: str, event_dict: dict) -> str:
    # structlog's LogfmtRenderer leaves a one-word value with a newline or tab unquoted (it
    # quotes only for a space, `=` or `"`), which splits the line or garbles the value
    return " ".join(f"{_logfmt_key(k)}={_logfmt_value(v)}" for k, v in event_dict.items())


def _logfmt_key(key: str) -> str:
    return "".join("_" if c <= " " or c in '="' else c for c in key) or "_"


def formatter(log_format: str = "logfmt") -> logging.Formatter:
    """The formatter of every logstore log line; `log_format` is "logfmt" or "json"."""
    renderer = (structlog.processors.JSONRenderer(ensure_ascii=False, separators=(",", ":"))
                if log_format == "json" else render_logfmt)
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.ExtraAdder(), _loki_keys],
        processors=[structlog.processors.format_exc_info,
                    structlog.processors.StackInfoRenderer(),
                    renderer])


class _Held(logging.Handler):
    """Records logged while the configuration is read, before its log format is known."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def held() -> Iterator[None]:
    """Keep logstore's records until configure() says how to write them: reading the config
    logs its warnings before the config has said logfmt or json. When the block raises,
    they are written in the default format before the error goes on."""
    logger = logging.getLogger(LOGGER)
    for h in logger.handlers:
        if isinstance(h, StderrHandler):
            logger.removeHandler(h)
    if not any(isinstance(h, _Held) for h in logger.handlers):
        logger.addHandler(_Held())
    logger.propagate = False
    logger.setLevel(logging.DEBUG)  # configure() filters by the configured level
    try:
        yield
    except BaseException:
        configure()
        raise


def configure(level: str = "info", log_format: str = "logfmt") -> None:
    """Write logstore's loggers to stderr at `level` in `log_format`; records held by
    held() are written now."""
    logger = logging.getLogger(LOGGER)
    held = [h for h in logger.handlers if isinstance(h, _Held)]
    handler = next((h for h in logger.handlers if isinstance(h, StderrHandler)), None)
    if handler is None:
        handler = StderrHandler()
        logger.addHandler(handler)
    handler.setFormatter(formatter(log_format))
    logger.propagate = False
    set_level(level)
    for h in held:
        logger.removeHandler(h)
        for record in h.records:
            if logger.isEnabledFor(record.levelno):
                handler.handle(record)


def capture_warnings() -> None:
    """In the server's processes, Python's warnings become log lines (through the root
    logger, which granian_dictconfig gives the same handler) instead of raw stderr text."""
    logging.captureWarnings(True)


def set_level(level: str) -> None:
    logging.getLogger(LOGGER).setLevel(LEVELS[level])


def granian_dictconfig(log_format: str) -> dict:
    """granian's `log_dictconfig`: its loggers, and anything that logs to the root logger
    in the server's processes (asyncio's errors, the framework's), through the same
    handler and format as logstore's own lines. granian sets its own logger's level."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"logstore": {"()": f"{__name__}.formatter", "log_format": log_format}},
        "handlers": {"logstore": {"class": f"{__name__}.StderrHandler", "formatter": "logstore"}},
        "loggers": {
            "_granian": {"handlers": ["logstore"], "level": "INFO", "propagate": False},
            "granian.access": {"handlers": ["logstore"], "level": "INFO", "propagate": False},
        },
        "root": {"handlers": ["logstore"], "level": "WARNING"},
    }
