"""The `logstore` command line: Loki's flag names and their meaning, Go's flag syntax.

`logstore -config.file=loki.yaml` starts the server the way `loki -config.file=loki.yaml`
does. A flag is `-name=value`, `-name value` or, for a switch, `-name` (two dashes work
too); the flags can come before or after the command. A flag error prints the usage and
exits 2, as Go's flag package does; a configuration error exits 1.

To add a command, write `def _name(run: Run) -> int` and add a Command to COMMANDS.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

import config as config_module
from config import Config, ConfigError
from services.runtime.version import logstore_version

EXIT_FLAG_ERROR = 2  # Go's flag.ExitOnError


@dataclass(frozen=True)
class Flag:
    name: str
    help: str
    kind: type = str                            # str, int or bool
    sets: tuple[str | None, str] | None = None  # the config key it overrides
    aliases: tuple[str, ...] = ()               # logstore's older spellings


FLAGS = (
    Flag("config.file", "Configuration file to load (Loki's YAML). A comma-separated list "
         "uses the first file that exists. Default: $LOGSTORE_CONFIG, else built-in "
         "defaults.", aliases=("config",)),
    Flag("config.expand-env", "Expand ${VAR} and ${VAR:-default} in the configuration file "
         "from the environment before it is read.", bool),
    Flag("log.level", "Only log messages at or above this level: debug, info, warn, error.",
         sets=("server", "log_level"), aliases=("log-level",)),
    Flag("log.format", "Output log messages in the given format: logfmt or json.",
         sets=("server", "log_format")),
    Flag("server.http-listen-address", "HTTP server listen address.",
         sets=("server", "http_listen_address"), aliases=("host",)),
    Flag("server.http-listen-port", "HTTP server listen port.", int,
         sets=("server", "http_listen_port"), aliases=("port",)),
    Flag("server.path-prefix", "Base path to serve all routes from (e.g. /logs).",
         sets=("server", "http_path_prefix")),
    Flag("common.path-prefix", "Directory of the data (the SQLite database).",
         sets=("common", "path_prefix"), aliases=("data-dir",)),
    Flag("auth.enabled", "Require the X-Scope-OrgID header (multi-tenant mode).", bool,
         sets=(None, "auth_enabled")),
    Flag("runtime-config.file", "File of per-tenant limits, read again while running.",
         sets=("runtime_config", "file")),
    Flag("target", "Components to run. logstore is one process that runs them all: only "
         "'all' is accepted."),
    Flag("print-config-stderr", "Print the effective configuration as YAML to stderr at "
         "start.", bool),
    Flag("max-rate", "backup: copy at most this much a second (e.g. 50MB; default: no "
         "cap), to spare the serving process's disk."),
    Flag("version", "Print logstore's version and exit.", bool),
    Flag("help", "Print this usage and exit.", bool, aliases=("h",)),
)
_BY_NAME = {name: flag for flag in FLAGS for name in (flag.name, *flag.aliases)}


class FlagError(Exception):
    pass


@dataclass
class Run:
    """One invocation: the command, its arguments and the flags given."""
    command: Command
    args: list[str]
    flags: dict[str, Any] = field(default_factory=dict)

    @property
    def overrides(self) -> dict[tuple[str | None, str], Any]:
        return {flag.sets: self.flags[flag.name] for flag in FLAGS
                if flag.sets is not None and flag.name in self.flags}

    @property
    def expand_env(self) -> bool:
        return bool(self.flags.get("config.expand-env"))

    def config_path(self) -> str | None:
        listed = self.flags.get("config.file")
        if not listed:
            return None
        paths = [p for p in listed.split(",") if p]
        for path in paths:
            if os.path.exists(path):
                return path
        # none exists: reading the first says why
        return paths[0] if paths else None

    def load(self) -> Config:
        return config_module.load_config(self.config_path(), overrides=self.overrides,
                                         expand_env=self.expand_env)


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    run: Callable[[Run, Config], int]
    args: tuple[str, ...] = ()  # names of the positional arguments it takes, for the usage


def _serve(run: Run, cfg: Config) -> int:
    from app import serve

    os.environ.update(worker_env(run, os.environ))
    return serve(cfg, run.config_path())


def worker_env(run: Run, environ: Any) -> dict[str, str]:
    """What the granian worker, which builds its config again from the environment, needs
    to build the same one: the flags (over any it inherited) and the expand-env choice."""
    inherited = json.loads(environ.get(config_module.OVERRIDES_ENV) or "[]")
    flags = [[section, key, value] for (section, key), value in run.overrides.items()]
    return {config_module.OVERRIDES_ENV: json.dumps(inherited + flags),
            config_module.EXPAND_ENV_ENV: "true" if run.expand_env else "false"}


def _migrate(run: Run, cfg: Config) -> int:
    from app import seal_backlog
    from storage.db import DB_FILENAME, DatabaseTooNew, connect, migrate
    from storage.dir_lock import DataDirInUse, DataDirLock

    try:
        os.makedirs(cfg.data_dir, exist_ok=True)
        DataDirLock(cfg.data_dir).acquire()  # held until this process exits
        conn = connect(os.path.join(cfg.data_dir, DB_FILENAME),
                       synchronous=cfg.storage.synchronous)
        applied = migrate(conn)
    except (DataDirInUse, DatabaseTooNew, OSError) as exc:
        print(f"logstore: {exc}", file=sys.stderr)
        return 1
    print("applied: " + (", ".join(applied) if applied else "nothing (up to date)"), flush=True)
    seal_backlog(conn, cfg)
    conn.close()
    return 0


def _backup(run: Run, cfg: Config) -> int:
    from storage.backup import backup_command

    try:
        max_rate = config_module.parse_size(run.flags.get("max-rate", 0))
    except ConfigError as exc:
        print(f"logstore: -max-rate: {exc}", file=sys.stderr)
        return EXIT_FLAG_ERROR
    return backup_command(cfg.data_dir, run.args[0], max_rate)


def _copy_to_clickhouse(run: Run, cfg: Config) -> int:
    from services.upkeep.copy_to_clickhouse import main_command
    return main_command(cfg)


def _print_config(run: Run, cfg: Config) -> int:
    print(config_module.render_yaml(config_module.to_plain(cfg)), end="")
    return 0


COMMANDS = {c.name: c for c in (
    Command("serve", "run the server (the default)", _serve),
    Command("migrate", "apply database migrations, seal the backlog and exit", _migrate),
    Command("config", "print the effective configuration as YAML and exit", _print_config),
    Command("copy-to-clickhouse", "copy the data directory's logs into storage.clickhouse "
            "(resumable), verify the counts and exit", _copy_to_clickhouse),
    Command("backup", "copy the database, consistent while it serves, into DEST, a new data "
            "directory", _backup, args=("DEST",)),
)}
DEFAULT_COMMAND = "serve"


def parse(argv: list[str]) -> Run:
    """Go's flag syntax, with the flags allowed before and after the command."""
    flags: dict[str, Any] = {}
    positionals: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positionals.extend(argv[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        name, has_value, value = arg[2 if arg.startswith("--") else 1:].partition("=")
        if not name or name[0] in "-=":
            raise FlagError(f"bad flag syntax: {arg}")
        flag = _BY_NAME.get(name)
        if flag is None:
            raise FlagError(f"flag provided but not defined: -{name}")
        if flag.kind is bool:
            flags[flag.name] = _parse_bool(value, name) if has_value else True
            continue
        if not has_value:
            if i >= len(argv):
                raise FlagError(f"flag needs an argument: -{name}")
            value = argv[i]
            i += 1
        if flag.kind is int:
            try:
                flags[flag.name] = int(value)
            except ValueError:
                raise FlagError(f'invalid value "{value}" for flag -{name}: parse error') \
                    from None
        else:
            flags[flag.name] = value
    name = positionals.pop(0) if positionals else DEFAULT_COMMAND
    command = COMMANDS.get(name)
    if command is None:
        raise FlagError(f"unknown command {name!r} (commands: {', '.join(COMMANDS)})")
    if len(positionals) != len(command.args):
        wanted = " ".join(command.args) or "no arguments"
        raise FlagError(f"{command.name} takes {wanted}, got {positionals or 'none'}")
    return Run(command, positionals, flags)


def _parse_bool(text: str, name: str) -> bool:
    # Go's strconv.ParseBool
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise FlagError(f'invalid boolean value "{text}" for -{name}: parse error')


def usage() -> str:
    lines = ["Usage: logstore [command] [flags]", "",
             "A Loki-compatible log store in one process over SQLite. It reads Loki's "
             "configuration file", "and takes Loki's flags: logstore -config.file=loki.yaml",
             "", "Commands:"]
    width = max(len(" ".join((c.name, *c.args))) for c in COMMANDS.values())
    for c in COMMANDS.values():
        lines.append(f"  {' '.join((c.name, *c.args)):<{width}}  {c.summary}")
    lines += ["", "Flags (-flag=value, -flag value, or -flag for a switch; --flag works too):"]
    for flag in FLAGS:
        kind = {str: " string", int: " int", bool: ""}[flag.kind]
        short = "".join(f", -{a}" for a in flag.aliases if len(a) == 1)
        lines.append(f"  -{flag.name}{kind}{short}")
        lines += textwrap.wrap(flag.help + _default_text(flag), 88, initial_indent=" " * 8,
                               subsequent_indent=" " * 8)
    older = [f"--{a} (-{f.name})" for f in FLAGS for a in f.aliases if len(a) > 1]
    lines += ["", "Older spellings still accepted: " + ", ".join(older),
              "", "The LOGSTORE_* environment variables (README) apply under the flags."]
    return "\n".join(lines) + "\n"


def _default_text(flag: Flag) -> str:
    if flag.sets is None:
        return ""
    section, key = flag.sets
    holder = Config() if section is None else getattr(Config(), section)
    value = getattr(holder, key, None)
    return f" (default {value!r})" if value not in (None, "", False) else ""


def version_text() -> str:
    return (f"logstore, version {logstore_version()} (python {platform.python_version()}, "
            f"{sys.platform}/{platform.machine()})")


def main(argv: list[str] | None = None) -> int:
    try:
        run = parse(sys.argv[1:] if argv is None else argv)
    except FlagError as exc:
        print(f"logstore: {exc}", file=sys.stderr)
        print(usage(), end="", file=sys.stderr)
        return EXIT_FLAG_ERROR
    if run.flags.get("help"):
        print(usage(), end="")
        return 0
    if run.flags.get("version"):
        print(version_text())
        return 0
    target = run.flags.get("target", "all")
    if target != "all":
        print(f"logstore: -target={target}: logstore runs every component in one process, "
              "only -target=all is supported", file=sys.stderr)
        return 1
    from services.runtime import logs

    try:
        # warnings found while reading the config wait for its log format
        with logs.held():
            cfg = run.load()
    except ConfigError as exc:
        print(f"logstore: {exc}", file=sys.stderr)
        return 1
    logs.configure(cfg.server.log_level, cfg.server.log_format)
    if run.flags.get("print-config-stderr"):
        print(config_module.render_yaml(config_module.to_plain(cfg)), end="", file=sys.stderr,
              flush=True)
    return run.command.run(run, cfg)
