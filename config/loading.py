"""Where a configuration comes from: a YAML file (Loki's, with -config.expand-env if asked),
the LOGSTORE_* environment, the flags; and how one is printed (`logstore config`, /config)."""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec
import yaml

from config import DURATION_FIELDS, Config, ConfigError, config_from_dict
from config.expand import ExpandError, expand_env
from logql.gocompat.format import prom_duration_str

# environment variable -> (section, key); applied over the file, under the flags
ENV_OVERRIDES = {
    "LOGSTORE_HOST": ("server", "http_listen_address"),
    "LOGSTORE_PORT": ("server", "http_listen_port"),
    "LOGSTORE_LOG_LEVEL": ("server", "log_level"),
    "LOGSTORE_LOG_FORMAT": ("server", "log_format"),
    "LOGSTORE_DATA_DIR": ("common", "path_prefix"),
    "LOGSTORE_AUTH_ENABLED": (None, "auth_enabled"),
    "LOGSTORE_GRAFANA_ADMIN_PASSWORD": ("grafana", "admin_password"),
}


# the serve command hands its flags to the granian worker through this variable (JSON:
# [[section or null, key, value], ...]); they apply over the environment, like flags
OVERRIDES_ENV = "LOGSTORE_OVERRIDES"
EXPAND_ENV_ENV = "LOGSTORE_CONFIG_EXPAND_ENV"


def load_config(path: str | None = None, env: dict[str, str] | None = None,
                overrides: dict[tuple[str | None, str], Any] | None = None,
                expand_env: bool | None = None, warn_ignored: bool = True) -> Config:
    """File (path or $LOGSTORE_CONFIG), then environment, then explicit overrides (flags).
    With `expand_env` (default: $LOGSTORE_CONFIG_EXPAND_ENV), ${VAR} references in the file
    are replaced from `env` first, as Loki's -config.expand-env does."""
    env = dict(os.environ if env is None else env)
    path = path or env.get("LOGSTORE_CONFIG") or None
    if expand_env is None:
        expand_env = env.get(EXPAND_ENV_ENV, "").lower() in ("1", "true")
    data: dict = {}
    if path:
        data = _read_file(path, env if expand_env else None)
    layered: dict[tuple[str | None, str], Any] = {}
    for var, target in ENV_OVERRIDES.items():
        if env.get(var):
            value: Any = env[var]
            if target[1] == "auth_enabled":
                value = value.lower() in ("1", "true", "yes", "on")
            layered[target] = value
    if env.get(OVERRIDES_ENV):
        layered.update({(section, key): value
                        for section, key, value in json.loads(env[OVERRIDES_ENV])})
    layered.update({k: v for k, v in (overrides or {}).items() if v is not None})
    for (section, key), value in layered.items():
        if value is None:
            continue
        if section is None:
            data[key] = value
        else:
            sec = data.get(section)
            if not isinstance(sec, dict):
                sec = data[section] = {}
            sec[key] = value
    return config_from_dict(data, warn_ignored)


def _read_file(path: str, env: dict[str, str] | None) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if env is not None:
            text = expand_env(text, env)
        loaded = yaml.safe_load(text)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except ExpandError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return loaded or {}


def to_plain(cfg: Config) -> dict:
    plain = msgspec.to_builtins(cfg)
    for section in plain.values():
        if isinstance(section, dict):
            for key in DURATION_FIELDS & section.keys():
                section[key] = prom_duration_str(section[key])
    for rule in plain["limits_config"]["retention_stream"]:
        rule["period"] = prom_duration_str(rule["period"])
    for client in plain["ruler"]["remote_write"]["clients"].values():
        client["remote_timeout"] = prom_duration_str(client["remote_timeout"])
    if plain.get("grafana", {}).get("admin_password"):
        plain["grafana"]["admin_password"] = "********"
    if plain.get("server", {}).get("admin_token"):
        plain["server"]["admin_token"] = "********"
    return plain


def diff_from_defaults(cfg: Config) -> dict:
    def walk(current: Any, default: Any) -> Any:
        if isinstance(current, dict) and isinstance(default, dict):
            out = {}
            for key, value in current.items():
                sub = walk(value, default.get(key))
                if sub is not _SAME:
                    out[key] = sub
            return out or _SAME
        return _SAME if current == default else current

    result = walk(to_plain(cfg), to_plain(Config()))
    return {} if result is _SAME else result


_SAME = object()


def render_yaml(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
