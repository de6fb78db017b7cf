"""Query statistics and the `data.stats` object of query responses (http-api.md §4.5).

`QueryStats` is filled by the evaluators (log and metric) while they run; `stats_json()`
renders Loki's full structure, with honest zeros for what has no equivalent here (chunks,
caches, bloom filters, ingesters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from logql.model import canonical_pairs


@dataclass
class QueryStats:
    lines_scanned: int = 0        # entries examined (in SQLite or in Python)
    bytes_scanned: int = 0        # their line bytes
    post_filter_lines: int = 0    # entries that survived the pipeline
    entries_returned: int = 0     # entries (log query) or series (metric query) returned
    streams: int = 0              # streams selected by the stream selector
    exec_time: float = 0.0        # seconds
    queue_time: float = 0.0       # seconds waited before evaluation started
    used_rollups: bool = False    # a metric query counted from rollups, not lines

    def add(self, other: "QueryStats") -> None:
        self.lines_scanned += other.lines_scanned
        self.bytes_scanned += other.bytes_scanned
        self.post_filter_lines += other.post_filter_lines
        self.streams += other.streams


def _cache() -> dict[str, int]:
    return {"entriesFound": 0, "entriesRequested": 0, "entriesStored": 0, "bytesReceived": 0,
            "bytesSent": 0, "requests": 0, "downloadTime": 0, "queryLengthServed": 0}


def _store(lines: int, size: int, post_filter: int) -> dict[str, Any]:
    return {
        "totalChunksRef": 0, "totalChunksDownloaded": 0, "chunksDownloadTime": 0,
        "queryReferencedStructuredMetadata": False, "queryUsedV2Engine": False,
        "chunk": {
            "headChunkBytes": 0, "headChunkLines": 0,
            "decompressedBytes": size, "decompressedLines": lines,
            "compressedBytes": 0, "totalDuplicates": 0, "postFilterLines": post_filter,
            "headChunkStructuredMetadataBytes": 0, "decompressedStructuredMetadataBytes": 0,
        },
        "chunkRefsFetchTime": 0, "congestionControlLatency": 0,
        "pipelineWrapperFilteredLines": 0,
        "dataobj": {
            "prePredicateDecompressedRows": 0, "prePredicateDecompressedBytes": 0,
            "prePredicateDecompressedStructuredMetadataBytes": 0, "postPredicateRows": 0,
            "postPredicateDecompressedBytes": 0, "postPredicateStructuredMetadataBytes": 0,
            "postFilterRows": 0, "pagesScanned": 0, "pagesDownloaded": 0,
            "pagesDownloadedBytes": 0, "pageBatches": 0, "totalRowsAvailable": 0,
            "totalPageDownloadTime": 0, "wireBytesTransferred": 0,
        },
    }


def stats_json(s: QueryStats) -> dict[str, Any]:
    """The `stats` object; everything read from storage is attributed to the querier."""
    exec_time = s.exec_time
    per_sec = (lambda n: int(n / exec_time)) if exec_time > 0 else (lambda n: 0)
    return {
        "summary": {
            "bytesProcessedPerSecond": per_sec(s.bytes_scanned),
            "linesProcessedPerSecond": per_sec(s.lines_scanned),
            "totalBytesProcessed": s.bytes_scanned,
            "totalLinesProcessed": s.lines_scanned,
            "execTime": exec_time,
            "queueTime": s.queue_time,
            "subqueries": 0,
            "totalEntriesReturned": s.entries_returned,
            "splits": 0,
            "shards": 0,
            "totalPostFilterLines": s.post_filter_lines,
            "totalStructuredMetadataBytesProcessed": 0,
        },
        "querier": {
            "store": _store(s.lines_scanned, s.bytes_scanned, s.post_filter_lines),
            "querierExecTime": exec_time,
        },
        "ingester": {
            "totalReached": 0, "totalChunksMatched": 0, "totalBatches": 0,
            "totalLinesSent": 0, "store": _store(0, 0, 0),
        },
        "cache": {name: _cache() for name in (
            "chunk", "index", "result", "statsResult", "volumeResult", "seriesResult",
            "labelResult", "instantMetricResult", "logResult", "taskResult")},
        "index": {
            "totalChunks": 0, "postFilterChunks": 0, "shardsDuration": 0,
            "usedBloomFilters": False, "totalStreams": s.streams, "chunkRefsLookupTime": 0,
            "bloomFilterTime": 0,
        },
    }


def categorized_labels(builder: Any) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """An entry's stream labels and the third value element of the `categorize-labels`
    encoding (`structuredMetadata` / `parsed`, each only when not empty)."""
    stream, sm, parsed = builder.categories()
    extra: dict[str, dict[str, str]] = {}
    if sm:
        extra["structuredMetadata"] = sm
    if parsed:
        extra["parsed"] = parsed
    return stream, extra


def streams_result(entries: list[tuple[tuple, int, str]]) -> list[dict]:
    """Kept entries `(label_key, ts, line)` (already in direction order; the key is the
    entry's labels as pairs sorted by name) grouped into result streams sorted by their label
    string (logql.md §6 steps 7-8)."""
    groups: dict[tuple, list[list[str]]] = {}
    for key, ts, line in entries:
        values = groups.get(key)
        if values is None:
            values = groups[key] = []
        values.append([str(ts), line])
    out = [(canonical_pairs(key), key, values) for key, values in groups.items()]
    out.sort(key=lambda item: item[0])
    return [{"stream": dict(key), "values": values} for _, key, values in out]


def categorized_result(entries: list[tuple[tuple, int, str, dict]]) -> list[dict]:
    """With `categorize-labels`: grouped by the stream labels only; every value carries its
    own structured metadata and parsed labels as a third element."""
    groups: dict[tuple, list[list]] = {}
    for key, ts, line, extra in entries:
        groups.setdefault(key, []).append([str(ts), line, extra])
    out = [(canonical_pairs(key), key, values) for key, values in groups.items()]
    out.sort(key=lambda item: item[0])
    return [{"stream": dict(key), "values": values} for _, key, values in out]
