"""Per-entry label state seen by the log pipeline (logql.md §4).

A `LabelsBuilder` is created once per stream and `reset()` for every entry, so
a pipeline that never touches labels (pure line filters) pays nothing for it.

Three categories, lowest to highest precedence:

* stream  -- the stream's indexed label set (shared dict, never mutated here)
* SM      -- this entry's structured metadata; names colliding with a stream
             label are renamed `<name>_extracted` at entry start
* parsed  -- labels set by parsers, label_format, ...

`__error__` / `__error_details__` are kept apart from the three dicts (they are
"error state"); they are reported in the parsed category of the final labels.
"""

from __future__ import annotations

ERROR = "__error__"
ERROR_DETAILS = "__error_details__"
PRESERVE_ERROR = "__preserve_error__"
EXTRACTED_SUFFIX = "_extracted"

# Error label values (logql.md §5.10).
JSON_PARSER_ERR = "JSONParserErr"
LOGFMT_PARSER_ERR = "LogfmtParserErr"
LABEL_FILTER_ERR = "LabelFilterErr"
SAMPLE_EXTRACTION_ERR = "SampleExtractionErr"
TEMPLATE_FORMAT_ERR = "TemplateFormatErr"

_EMPTY: dict[str, str] = {}


class LabelsBuilder:
    """Label state of one log entry while it flows through a pipeline."""

    __slots__ = ("stream", "sm", "parsed", "deleted", "extracted", "error", "error_details")

    def __init__(self, stream: dict[str, str], structured_metadata=None):
        self.stream = stream
        self.sm: dict[str, str] = _EMPTY
        self.parsed: dict[str, str] = {}
        # names removed from the stream / SM categories for this entry
        self.deleted: set[str] = set()
        # names written by parsers / label_format this entry (first extraction wins, §5.4.7)
        self.extracted: set[str] = set()
        self.error: str | None = None
        self.error_details: str | None = None
        if structured_metadata:
            self.reset(structured_metadata)

    def reset(self, structured_metadata=None) -> "LabelsBuilder":
        """Start a new entry of the same stream.

        `structured_metadata` is a dict or an iterable of (name, value) pairs.
        """
        if self.parsed:
            self.parsed = {}
        if self.deleted:
            self.deleted = set()
        if self.extracted:
            self.extracted = set()
        self.error = None
        self.error_details = None
        if structured_metadata:
            self._set_sm(structured_metadata)
        elif self.sm:
            self.sm = _EMPTY
        return self

    def _set_sm(self, structured_metadata) -> None:
        items = structured_metadata.items() if isinstance(structured_metadata, dict) else structured_metadata
        stream = self.stream
        sm: dict[str, str] = {}
        for name, value in items:
            if name == ERROR:
                self.error = value
                continue
            if name == ERROR_DETAILS:
                self.error_details = value
                continue
            if name in stream:
                name += EXTRACTED_SUFFIX
            if name not in sm:
                sm[name] = value
        self.sm = sm

    # ----------------------------------------------------------------- lookups

    def get(self, name: str) -> str | None:
        """Current value of `name` (parsed > SM > stream), None when absent."""
        v = self.parsed.get(name)
        if v is not None:
            return v
        if name == ERROR:
            return self.error
        if name == ERROR_DETAILS:
            return self.error_details
        if self.deleted and name in self.deleted:
            return None
        v = self.sm.get(name)
        if v is not None:
            return v
        return self.stream.get(name)

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    def base_has(self, name: str) -> bool:
        """True when `name` is a stream label or SM of this entry: a parser
        writing it must use `<name>_extracted` instead (§5.4)."""
        return name in self.stream or name in self.sm


    # ----------------------------------------------------------------- updates

    def set(self, name: str, value: str) -> None:
        """Set a parsed label; it hides the same name in the SM/stream categories."""
        if name == ERROR:
            self.error = value
            return
        if name == ERROR_DETAILS:
            self.error_details = value
            return
        self.parsed[name] = value
        if name in self.stream or name in self.sm:
            self.deleted.add(name)

    def set_extracted(self, name: str, value: str) -> None:
        """Parser-style set: records the name for first-extraction-wins."""
        self.extracted.add(name)
        self.set(name, value)

    def delete(self, name: str) -> None:
        if name == ERROR:
            self.error = None
            return
        if name == ERROR_DETAILS:
            self.error_details = None
            return
        self.parsed.pop(name, None)
        if name in self.stream or name in self.sm:
            self.deleted.add(name)

    def set_error(self, error: str, details: str | None = None) -> None:
        """Record a pipeline error unless one is already set (first error wins)."""
        if self.error is None:
            self.error = error
            if details is not None and self.error_details is None:
                self.error_details = details

    # ----------------------------------------------------------------- results

    def stream_labels(self) -> dict[str, str]:
        """Stream labels still visible (not deleted, not overridden)."""
        if not self.deleted:
            return dict(self.stream)
        deleted = self.deleted
        return {k: v for k, v in self.stream.items() if k not in deleted}

    def structured_metadata(self) -> dict[str, str]:
        """Structured metadata still visible (not deleted, not overridden)."""
        if not self.sm:
            return {}
        if not self.deleted:
            return dict(self.sm)
        deleted = self.deleted
        return {k: v for k, v in self.sm.items() if k not in deleted}

    def parsed_labels(self) -> dict[str, str]:
        """Parsed labels plus the error labels when set."""
        out = dict(self.parsed)
        if self.error is not None:
            out[ERROR] = self.error
        if self.error_details is not None:
            out[ERROR_DETAILS] = self.error_details
        return out

    def categories(self) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """(stream, structuredMetadata, parsed) dicts for `categorize-labels`."""
        return self.stream_labels(), self.structured_metadata(), self.parsed_labels()

    def labels(self) -> dict[str, str]:
        """Final label set of the entry, sorted by name (§4, §6 step 7)."""
        if not self.parsed and not self.sm and self.error is None and self.error_details is None and not self.deleted:
            return self.stream  # untouched entry: share the stream's dict
        # the three categories merged into one dict, without a copy of each first (it runs
        # for every entry a log query keeps)
        deleted = self.deleted
        if deleted:
            out = {k: v for k, v in self.stream.items() if k not in deleted}
            if self.sm:
                out.update({k: v for k, v in self.sm.items() if k not in deleted})
        else:
            out = {**self.stream, **self.sm}
        out.update(self.parsed)
        if self.error is not None:
            out[ERROR] = self.error
        if self.error_details is not None:
            out[ERROR_DETAILS] = self.error_details
        return dict(sorted(out.items()))

    def template_data(self) -> dict[str, str]:
        """Map name -> value given to line_format / label_format templates."""
        out = self.stream_labels()
        if self.sm:
            out.update(self.structured_metadata())
        out.update(self.parsed_labels())
        return out

    def key(self) -> tuple:
        """Hashable identity of the final label set (for grouping results)."""
        return tuple(self.labels().items())

    def __repr__(self) -> str:
        return f"LabelsBuilder({self.labels()!r})"
