"""Configuration: Loki-shaped YAML, environment variables and flags over embedded defaults.

A Loki user should recognise the file: the keys logstore uses keep Loki's names and
defaults; Loki keys logstore has no use for (config/reference.py knows them all) are accepted
with one warning; anything else is an error at start that names every such key, so a typo
never silently does nothing.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import msgspec

from config import reference
from config.reference import KeyReport
from logql.gocompat.format import prom_duration_str
from logql.gocompat.values import parse_go_duration, parse_prom_duration

log = logging.getLogger("logstore.config")

DEFAULT_SERVICE_NAME_LABELS = [
    "service", "app", "application", "app_name", "name", "app_kubernetes_io_name",
    "container", "container_name", "k8s_container_name", "component", "workload",
    "job", "k8s_job_name",
]
DEFAULT_LOG_LEVEL_FIELDS = [
    "level", "LEVEL", "Level", "log.level", "severity", "SEVERITY", "Severity",
    "SeverityText", "lvl", "LVL", "Lvl", "severity_text", "Severity_Text", "SEVERITY_TEXT",
]


class ServerConfig(msgspec.Struct, kw_only=True):
    http_listen_address: str = "127.0.0.1"
    http_listen_port: int = 3100
    log_level: str = "info"
    log_format: str = "logfmt"  # or "json": how logstore writes its own log lines
    # also answer Loki's own paths (/loki, /prometheus, /api/prom): its clients hard-code them
    loki_paths: bool = True
    # logstore's own: when set, the operational endpoints that change state (POST /log_level,
    # /flush, /flush/tenant, /ingester/prepare_shutdown and /ingester/shutdown) want
    # `Authorization: Bearer <token>`, for hosts without an authenticating proxy in front
    admin_token: str = ""
    # Loki's: serve every route under this path (`/logs`: /logs/ready, /logs/loki/api/v1/push,
    # ...) and nothing outside it, for a reverse proxy that forwards a sub-path unchanged
    http_path_prefix: str = ""


class CommonConfig(msgspec.Struct, kw_only=True):
    path_prefix: str = "./data"


class DistributorConfig(msgspec.Struct, kw_only=True):
    max_recv_msg_size: int = 100 << 20
    # Loki allows 5000 MiB; one gzip bomb would then take gigabytes of memory before its 400.
    # No Loki client sends batches near 100 MiB (Promtail and Alloy send about 1 MiB).
    max_decompressed_size: int = 100 << 20
    # the sum of push bodies (read and inflated) held at once; past it pushes get 503 and
    # clients retry. Loki: 0 (no limit); ten concurrent 100 MB bodies would be a gigabyte
    max_inflight_bytes: int = 128 << 20


class OtlpAttributeRule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One rule of Loki's `otlp_config`: attributes named in `attributes` or matching
    `regex` get `action` (index_label, structured_metadata or drop)."""
    action: str
    attributes: list[str] = msgspec.field(default_factory=list)
    regex: str = ""


class OtlpResourceAttributes(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    ignore_defaults: bool = False  # true: no default index-label list (service.name, ...)
    attributes_config: list[OtlpAttributeRule] = msgspec.field(default_factory=list)


class OtlpConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    resource_attributes: OtlpResourceAttributes = msgspec.field(
        default_factory=OtlpResourceAttributes)
    scope_attributes: list[OtlpAttributeRule] = msgspec.field(default_factory=list)
    log_attributes: list[OtlpAttributeRule] = msgspec.field(default_factory=list)
    severity_text_as_label: bool = False


OTLP_ACTIONS = ("index_label", "structured_metadata", "drop")


class RetentionStream(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One `limits_config.retention_stream` rule: streams matching `selector` keep `period`
    (ns); the highest `priority` wins, then the longest selector, then the shorter period."""
    selector: str
    priority: int = 0
    period: int = 0


class LimitsConfig(msgspec.Struct, kw_only=True):
    max_line_size: int = 256 * 1024
    max_line_size_truncate: bool = False   # cut long lines instead of refusing them
    max_line_size_truncate_identifier: str = ""
    max_label_names_per_series: int = 15
    max_label_name_length: int = 1024
    max_label_value_length: int = 2048
    reject_old_samples: bool = True
    reject_old_samples_max_age: int = 7 * 24 * 3600 * 10**9  # ns
    creation_grace_period: int = 10 * 60 * 10**9  # ns
    allow_structured_metadata: bool = True
    max_structured_metadata_size: int = 64 * 1024
    max_structured_metadata_entries_count: int = 128
    discover_service_name: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_SERVICE_NAME_LABELS))
    discover_log_levels: bool = True
    log_level_fields: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_LOG_LEVEL_FIELDS))
    max_entries_limit_per_query: int = 5000
    max_query_series: int = 500
    max_query_length: int = 721 * 3600 * 10**9  # ns
    max_query_lookback: int = 0     # ns; 0: no limit. Older parts of a query are not read
    max_query_range: int = 0        # ns; the longest [range] in a metric query; 0: no limit
    max_query_parallelism: int = 32  # reads of one tenant running at once
    max_concurrent_tail_requests: int = 10
    query_timeout: int = 60 * 10**9  # ns
    volume_enabled: bool = True
    volume_max_series: int = 1000
    otlp_config: OtlpConfig = msgspec.field(default_factory=OtlpConfig)
    retention_period: int = 0  # ns; 0: keep forever (used only with compactor.retention_enabled)
    # the log deletion API: disabled, filter-only (hide at query time) or filter-and-delete
    deletion_mode: str = "filter-and-delete"
    retention_stream: list[RetentionStream] = msgspec.field(default_factory=list)
    # ingest limits, Loki's keys (services/ingest/ingest_limits.py); 0 switches one off, and all
    # are off by default: one host has no distributor to shield (Loki: 4, 6, 3MB, 15MB, 5000)
    ingestion_rate_mb: float = 0.0
    ingestion_burst_size_mb: float = 0.0
    per_stream_rate_limit: int = 0       # bytes per second
    per_stream_rate_limit_burst: int = 0
    max_global_streams_per_user: int = 0
    max_streams_per_user: int = 0


class BasicAuth(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    username: str = ""
    password: str = ""


class RemoteWriteClient(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One `ruler.remote_write.clients.<name>`: Prometheus' remote_write keys."""
    url: str
    name: str = ""
    remote_timeout: int = 30 * 10**9  # ns
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    basic_auth: BasicAuth | None = None


class RemoteWriteConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = False
    clients: dict[str, RemoteWriteClient] = msgspec.field(default_factory=dict)
    add_org_id_header: bool = True
    # logstore's own: samples kept in SQLite per client while its receiver is away (the
    # oldest are dropped beyond it), and how many go in one request
    max_buffered_samples: int = 1_000_000
    max_samples_per_send: int = 2000


class RulerConfig(msgspec.Struct, kw_only=True):
    enable_api: bool = True
    evaluation_interval: int = 60 * 10**9
    poll_interval: int = 60 * 10**9
    alertmanager_url: str = ""  # comma-separated
    external_url: str = ""
    external_labels: dict[str, str] = msgspec.field(default_factory=dict)
    notification_queue_capacity: int = 10000
    notification_timeout: int = 10 * 10**9
    resend_delay: int = 60 * 10**9
    remote_write: RemoteWriteConfig = msgspec.field(default_factory=RemoteWriteConfig)


class CompactorConfig(msgspec.Struct, kw_only=True):
    retention_enabled: bool = False
    compaction_interval: int = 10 * 60 * 10**9
    # expired data is hidden from reads at once and removed from disk this much later
    retention_delete_delay: int = 2 * 3600 * 10**9
    # a delete request can be cancelled this long; then its lines are removed from disk
    delete_request_cancel_period: int = 24 * 3600 * 10**9
    # delete requests with line filters are split into pieces this long
    delete_max_interval: int = 24 * 3600 * 10**9


class PatternIngesterConfig(msgspec.Struct, kw_only=True):
    enabled: bool = False
    retain_for: int = 3 * 3600 * 10**9  # ns: how long mined counts are kept


class QuerierConfig(msgspec.Struct, kw_only=True):
    multi_tenant_queries_enabled: bool = False
    max_concurrent: int = 4   # reads running at once in the process (services/read/query_gate.py)
    # processes that evaluate log and metric queries off the server's interpreter
    # (services/read/query_pool.py); 0: on the server's reader threads
    worker_processes: int = 2


class QuerySchedulerConfig(msgspec.Struct, kw_only=True):
    # reads in flight (running and waiting) per tenant; one more is answered 429
    max_outstanding_requests_per_tenant: int = 32000


class GrafanaConfig(msgspec.Struct, kw_only=True):
    admin_user: str = "admin"
    admin_password: str = ""
    # Grafana's [security] keys: failed Basic logins allowed per login in 5 minutes
    disable_brute_force_login_protection: bool = False
    brute_force_login_protection_max_attempts: int = 5
    # Grafana's [auth] keys for session cookies (POST /login): a session ends this long after
    # its login, or after this long unused, whichever comes first (Grafana's defaults)
    login_maximum_lifetime_duration: int = 30 * 24 * 3600 * 10**9  # ns
    login_maximum_inactive_lifetime_duration: int = 7 * 24 * 3600 * 10**9  # ns
    # not Grafana's grafana_session: cookies are not told apart by port, and a Grafana on
    # the same host name would replace the session of logstore's page
    login_cookie_name: str = "logstore_session"


class ClickHouseConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`storage.clickhouse`: where the log data lives with `storage.backend: clickhouse`
    (docs/scale-out.md). `url` is `chdb:///a/dir` (the embedded engine), or
    `http(s)://host:port` of a server; the password is read from the environment variable
    named by `password_env`, never from the file."""
    url: str = ""
    database: str = "logstore"
    user: str = "default"
    password_env: str = "LOGSTORE_CLICKHOUSE_PASSWORD"
    cluster: str = ""   # replicated and Distributed tables ON CLUSTER; empty for one server


class SharedConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`storage.shared`: where the state several nodes share lives (rule groups and alerts,
    delete requests, patterns, Grafana's objects, the leases of once-per-cluster work;
    docs/scale-out.md). Empty `url`: the data directory's SQLite file. `url` is
    `postgresql://user@host:port/database`; the password is read from the environment
    variable named by `password_env`."""
    url: str = ""
    password_env: str = "LOGSTORE_SHARED_PASSWORD"


class StorageConfig(msgspec.Struct, kw_only=True):
    """logstore's own: where log data lives and how SQLite is driven."""
    # sqlite: everything in the data directory's one file; clickhouse: log data (streams,
    # entries, rollups) in ClickHouse, the rest still in the data directory
    backend: str = "sqlite"
    clickhouse: ClickHouseConfig = msgspec.field(default_factory=ClickHouseConfig)
    shared: SharedConfig = msgspec.field(default_factory=SharedConfig)
    # FULL fsyncs every group commit: an acknowledged push survives power loss, not only
    # a process crash. Group commit amortises the fsync over every request in the batch.
    synchronous: str = "full"
    read_connections: int = 4
    # the head's rows are sealed per stream and block_window into compressed blocks once the
    # window ended seal_grace_period ago, or earlier when a stream's window holds
    # block_max_rows rows (docs/storage.md)
    sealing_enabled: bool = True
    block_window: int = 3600 * 10**9  # ns
    seal_grace_period: int = 120 * 10**9  # ns
    block_max_rows: int = 20_000


class RuntimeConfig(msgspec.Struct, kw_only=True):
    """Per-tenant `overrides` of limits_config in a file read again every `period`
    (services/runtime/overrides.py)."""
    file: str = ""
    period: int = 10 * 10**9  # ns


class Config(msgspec.Struct, kw_only=True):
    auth_enabled: bool = False
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    common: CommonConfig = msgspec.field(default_factory=CommonConfig)
    distributor: DistributorConfig = msgspec.field(default_factory=DistributorConfig)
    limits_config: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    querier: QuerierConfig = msgspec.field(default_factory=QuerierConfig)
    query_scheduler: QuerySchedulerConfig = msgspec.field(default_factory=QuerySchedulerConfig)
    ruler: RulerConfig = msgspec.field(default_factory=RulerConfig)
    compactor: CompactorConfig = msgspec.field(default_factory=CompactorConfig)
    pattern_ingester: PatternIngesterConfig = msgspec.field(default_factory=PatternIngesterConfig)
    grafana: GrafanaConfig = msgspec.field(default_factory=GrafanaConfig)
    storage: StorageConfig = msgspec.field(default_factory=StorageConfig)
    runtime_config: RuntimeConfig = msgspec.field(default_factory=RuntimeConfig)

    @property
    def data_dir(self) -> str:
        return self.common.path_prefix


class ConfigError(ValueError):
    pass


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?i?B?)\s*$", re.IGNORECASE)
_SIZE_MULT = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}

DURATION_FIELDS = {"reject_old_samples_max_age", "creation_grace_period", "max_query_length",
                   "max_query_lookback", "max_query_range",
                   "query_timeout", "evaluation_interval", "compaction_interval",
                   "block_window", "seal_grace_period", "retention_period",
                   "retention_delete_delay", "delete_request_cancel_period",
                   "delete_max_interval", "period", "poll_interval", "notification_timeout",
                   "resend_delay", "retain_for", "login_maximum_lifetime_duration",
                   "login_maximum_inactive_lifetime_duration"}
SIZE_FIELDS = {"max_line_size", "max_structured_metadata_size", "max_recv_msg_size",
               "max_decompressed_size", "max_inflight_bytes", "per_stream_rate_limit",
               "per_stream_rate_limit_burst"}


def parse_duration_ns(text: str | int | float) -> int:
    """A duration as Loki's config takes it: Prometheus form (`1h30m`, `7d`, `1w`), Go form
    (`1.5h`, `500ms`, `250us`), or a bare number of seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text * 10**9)
    s = str(text).strip()
    for parse in (parse_prom_duration, parse_go_duration):
        try:
            return parse(s)
        except ValueError:
            continue
    raise ConfigError(f"not a valid duration string: {s!r}")


def parse_size(text: str | int) -> int:
    """Loki's flagext.ByteSize: 1024-based units, `256KB` == 262144."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"invalid size {text!r}")
    unit = m.group(2).upper().replace("I", "").replace("B", "")
    return int(float(m.group(1)) * _SIZE_MULT[unit])


def _check_keys(data: dict, struct_type: type, path: str, report: KeyReport,
                shown: str | None = None) -> dict:
    """Validate keys against a Struct and convert durations and sizes. A key logstore has
    no field for is looked up in Loki's reference at the same `path`: Loki's goes to
    report.ignored, anything else to report.unknown. Errors name keys under `shown`
    (default: `path`)."""
    known = set(struct_type.__struct_fields__)
    out: dict[str, Any] = {}
    loki_path = tuple(path.split(".")) if path else ()
    shown = path if shown is None else shown
    for key, value in data.items():
        full = f"{shown}.{key}" if shown else str(key)
        if key not in known:
            node = reference.lookup(loki_path + (str(key),))
            if node is reference.MISSING:
                report.unknown.append(full)
            else:
                report.ignored.append(full)
                reference.walk(value, node, full, report)
            continue
        try:
            out[key] = _convert(key, value, path, full, report)
        except ConfigError as exc:
            report.errors.append(str(exc))
    return out


def _convert(key: str, value: Any, path: str, full: str, report: KeyReport) -> Any:
    sub = _SECTION_TYPES.get(key) if not path else None
    if sub is not None:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"configuration key {full!r} must be a mapping")
        return _check_keys(value, sub, key, report)
    if key in DURATION_FIELDS:
        return parse_duration_ns(value)
    if key == "retention_stream" and path == "limits_config":
        return _retention_rules(value, full)
    if key == "remote_write" and path == "ruler":
        return _remote_write(value, full, report)
    if key == "external_labels" and path == "ruler":
        return _label_map(value, full)
    if key in SIZE_FIELDS:
        return parse_size(value)
    return value


def _raise_problems(report: KeyReport) -> None:
    problem = report.problem()
    if problem:
        raise ConfigError(problem)


_SECTION_TYPES: dict[str, type] = {
    "server": ServerConfig, "common": CommonConfig, "distributor": DistributorConfig,
    "limits_config": LimitsConfig, "querier": QuerierConfig, "ruler": RulerConfig,
    "query_scheduler": QuerySchedulerConfig,
    "compactor": CompactorConfig, "pattern_ingester": PatternIngesterConfig,
    "grafana": GrafanaConfig, "storage": StorageConfig, "runtime_config": RuntimeConfig,
}


def config_from_dict(data: dict | None, warn_ignored: bool = True) -> Config:
    report = KeyReport()
    checked = _check_keys(data or {}, Config, "", report)
    _raise_problems(report)
    if report.ignored and warn_ignored:
        log.warning("ignoring Loki configuration keys logstore has no use for: %s",
                    ", ".join(sorted(report.ignored)))
    try:
        cfg = msgspec.convert(checked, Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    validate(cfg)
    return cfg


_RW_KEYS = {"enabled", "clients", "add_org_id_header", "max_buffered_samples",
            "max_samples_per_send"}
_RW_IGNORED = {"config_refresh_period", "client"}
_RW_CLIENT_KEYS = {"url", "name", "remote_timeout", "headers", "basic_auth"}
# Prometheus remote_write keys that change nothing here
_RW_CLIENT_IGNORED = {"queue_config", "metadata_config", "send_exemplars",
                      "send_native_histograms", "follow_redirects", "enable_http2",
                      "write_relabel_configs", "round_robin_dns", "protobuf_message"}


def _remote_write(value: Any, where: str, report: KeyReport) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"configuration key {where!r} must be a mapping")
    out: dict[str, Any] = {}
    for key, v in value.items():
        if key in _RW_IGNORED:
            report.ignored.append(f"{where}.{key}")
        elif key not in _RW_KEYS:
            report.unknown.append(f"{where}.{key}")
        elif key == "clients":
            if not isinstance(v, dict):
                raise ConfigError(f"configuration key '{where}.clients' must be a mapping")
            out["clients"] = {str(name): _remote_write_client(c, f"{where}.clients.{name}",
                                                             report)
                              for name, c in v.items()}
        else:
            out[key] = v
    return out


def _remote_write_client(value: Any, where: str, report: KeyReport) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"configuration key {where!r} must be a mapping")
    out: dict[str, Any] = {}
    for key, v in value.items():
        if key in _RW_CLIENT_IGNORED:
            report.ignored.append(f"{where}.{key}")
        elif key not in _RW_CLIENT_KEYS:
            report.unknown.append(f"{where}.{key}")
        elif key == "remote_timeout":
            out[key] = parse_duration_ns(v)
        else:
            out[key] = v
    if not out.get("url"):
        raise ConfigError(f"{where}.url must be set")
    return out


def _label_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"configuration key {where!r} must be a mapping")
    for name in value:
        if not _LABEL_NAME.match(str(name)):
            raise ConfigError(f"{where}: invalid label name {name!r}")
    return {str(k): str(v) for k, v in value.items()}


def check_limits(defaults: LimitsConfig, keys: dict, path: str,
                 per_tenant: frozenset[str]) -> LimitsConfig:
    """A tenant's limits: `defaults` with the (raw, as in YAML) `keys` replaced; errors
    name keys under `path`. A limits_config key outside `per_tenant` is refused: it would be
    shown as the tenant's and not applied."""
    for key in keys:
        if key in LimitsConfig.__struct_fields__ and key not in per_tenant:
            raise ConfigError(f"configuration key '{path}.{key}' cannot be set per tenant, "
                              "only in limits_config")
    report = KeyReport()
    checked = _check_keys(keys, LimitsConfig, "limits_config", report, shown=path)
    _raise_problems(report)
    if report.ignored:
        log.warning("ignoring Loki limits logstore has no use for: %s",
                    ", ".join(sorted(report.ignored)))
    try:
        limits = msgspec.convert({**msgspec.to_builtins(defaults), **checked}, LimitsConfig,
                                 strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid {path}: {exc}") from None
    _validate_limits(limits, path)
    return limits


def limits_diff(limits: LimitsConfig, defaults: LimitsConfig | None) -> dict:
    """A tenant's limits as YAML-ready values (durations printed); with `defaults`, only the
    keys that differ."""
    def plain(lc: LimitsConfig) -> dict:
        out = msgspec.to_builtins(lc)
        for key in DURATION_FIELDS & out.keys():
            out[key] = prom_duration_str(out[key])
        for rule in out["retention_stream"]:
            rule["period"] = prom_duration_str(rule["period"])
        return out

    mine = plain(limits)
    if defaults is None:
        return mine
    base = plain(defaults)
    return {k: v for k, v in mine.items() if base.get(k) != v}


def _retention_rules(value: Any, where: str = "limits_config.retention_stream") -> list[dict]:
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list")
    out = []
    for i, rule in enumerate(value):
        if not isinstance(rule, dict) or not rule.get("selector"):
            raise ConfigError(f"{where}[{i}] needs a selector")
        try:
            from logql import parse_selector
            parse_selector(str(rule["selector"]))
        except Exception as exc:  # noqa: BLE001 - any parse failure is a config error
            raise ConfigError(f"{where}[{i}].selector: {exc}") from None
        rule = dict(rule)
        rule["period"] = parse_duration_ns(rule.get("period", 0))
        out.append(rule)
    return out


def validate(cfg: Config) -> None:
    if cfg.server.log_level not in LOG_LEVELS:
        raise ConfigError(f"unrecognized log level {cfg.server.log_level!r}")
    if cfg.server.log_format not in LOG_FORMATS:
        raise ConfigError(f"unrecognized log format {cfg.server.log_format!r} "
                          f"(server.log_format is one of {', '.join(LOG_FORMATS)})")
    if cfg.storage.synchronous.lower() not in ("off", "normal", "full", "extra"):
        raise ConfigError("storage.synchronous must be one of off, normal, full, extra")
    _validate_limits(cfg.limits_config, "limits_config")
    if cfg.distributor.max_inflight_bytes < 0:
        raise ConfigError("max inflight bytes cannot be less than zero")  # Loki's text
    _validate_backend(cfg.storage)
    if cfg.storage.block_window <= 0:
        raise ConfigError("storage.block_window must be a positive duration")
    if cfg.storage.seal_grace_period < 0:
        raise ConfigError("storage.seal_grace_period must not be negative")
    if not 1 <= cfg.storage.block_max_rows <= 1_000_000:
        raise ConfigError("storage.block_max_rows must be between 1 and 1000000")
    if not 0 <= cfg.querier.worker_processes <= 64:
        raise ConfigError("querier.worker_processes must be between 0 and 64")
    if not 0 < cfg.server.http_listen_port < 65536:
        raise ConfigError("server.http_listen_port must be between 1 and 65535")
    if cfg.runtime_config.period <= 0:
        raise ConfigError("runtime_config.period must be a positive duration")
    cfg.server.http_path_prefix = path_prefix(cfg.server.http_path_prefix)
    for key in ("login_maximum_lifetime_duration", "login_maximum_inactive_lifetime_duration"):
        if getattr(cfg.grafana, key) <= 0:
            raise ConfigError(f"grafana.{key} must be a positive duration")
    if not _COOKIE_NAME.match(cfg.grafana.login_cookie_name):
        raise ConfigError("grafana.login_cookie_name must be letters, digits, '_' and '-', "
                          f"got {cfg.grafana.login_cookie_name!r}")


_COOKIE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


_PREFIX_SEGMENT = re.compile(r"^[A-Za-z0-9._~-]+$")


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _validate_backend(st: StorageConfig) -> None:
    if st.backend not in ("sqlite", "clickhouse"):
        raise ConfigError(f"storage.backend must be sqlite or clickhouse, not {st.backend!r}")
    if st.shared.url:
        if not st.shared.url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("storage.shared.url must be postgresql://user@host:port/database, "
                              f"not {st.shared.url!r}")
        if st.backend != "clickhouse":
            # the nodes sharing this state must also share their log data
            raise ConfigError("storage.shared.url needs storage.backend: clickhouse: nodes "
                              "that share their state must share their log data too")
    if st.backend != "clickhouse":
        return
    ch = st.clickhouse
    if not ch.url.startswith(("chdb://", "http://", "https://")):
        raise ConfigError("storage.clickhouse.url must be chdb:///a/directory or "
                          f"http(s)://host:port with storage.backend: clickhouse, not {ch.url!r}")
    if ch.url.startswith("chdb://") and not ch.url[len("chdb://"):].startswith("/"):
        raise ConfigError("storage.clickhouse.url: chdb:// takes an absolute directory, "
                          f"as chdb:///var/lib/logstore/clickhouse, not {ch.url!r}")
    for key in ("database", "cluster"):
        value = getattr(ch, key)
        if value and not _IDENTIFIER.match(value) or key == "database" and not value:
            raise ConfigError(f"storage.clickhouse.{key} must be a plain identifier "
                              f"(letters, digits, _), not {value!r}")
    if ch.cluster and ch.url.startswith("chdb://"):
        raise ConfigError("storage.clickhouse.cluster needs a ClickHouse server "
                          "(url: http(s)://...): the embedded engine (chdb://) has no cluster")


def path_prefix(value: str) -> str:
    """server.http_path_prefix normalised to `/a/b` (a trailing `/` dropped, `/` alone is no
    prefix), or a ConfigError saying what a prefix may hold."""
    if value in ("", "/"):
        return ""
    segments = value.removesuffix("/").split("/")
    if (not value.startswith("/") or
            not all(_PREFIX_SEGMENT.match(s) and s not in (".", "..") for s in segments[1:])):
        raise ConfigError(
            f"server.http_path_prefix must be a URL path such as /logs: a leading '/' and "
            f"segments of letters, digits, '.', '_', '~' and '-' (no empty, '.' or '..' "
            f"segment), got {value!r}")
    return "/".join(segments)


def _validate_limits(limits: LimitsConfig, path: str) -> None:
    if limits.deletion_mode not in ("disabled", "filter-only", "filter-and-delete"):
        raise ConfigError(f"{path}.deletion_mode must be one of disabled, filter-only, "
                          "filter-and-delete")
    _validate_otlp(limits.otlp_config, f"{path}.otlp_config")


def _validate_otlp(otlp: OtlpConfig, where: str = "limits_config.otlp_config") -> None:
    for section, rules in (("resource_attributes.attributes_config",
                            otlp.resource_attributes.attributes_config),
                           ("scope_attributes", otlp.scope_attributes),
                           ("log_attributes", otlp.log_attributes)):
        for rule in rules:
            if rule.action not in OTLP_ACTIONS:
                raise ConfigError(f"{where}.{section}: unknown action {rule.action!r} "
                                  f"(one of {', '.join(OTLP_ACTIONS)})")
            if rule.action == "index_label" and section == "scope_attributes":
                raise ConfigError(f"{where}.{section}: index_label action is not supported "
                                  "for scope attributes")
            if not rule.attributes and not rule.regex:
                raise ConfigError(f"{where}.{section}: a rule needs attributes or regex")
            if rule.regex:
                try:
                    re.compile(rule.regex)
                except re.error as exc:
                    raise ConfigError(f"{where}.{section}: invalid regex "
                                      f"{rule.regex!r}: {exc}") from None


LOG_LEVELS = ("debug", "info", "warn", "error")
LOG_FORMATS = ("logfmt", "json")


# where a config comes from (file, environment, flags) and how it is printed: config/loading.py
from config.loading import (ENV_OVERRIDES, EXPAND_ENV_ENV, OVERRIDES_ENV,  # noqa: E402
                            diff_from_defaults, load_config, render_yaml, to_plain)
