"""deploy/Containerfile without a container engine (none runs here): what it copies exists and
makes up the whole package, and the command it runs parses to the server it exposes."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from fnmatch import fnmatch

import yaml

import config as config_module
from tests.deploy.container_file import CONTAINERFILE, ROOT, instructions, last, words

INSTS = instructions(CONTAINERFILE.read_text())
DEFAULT_PORT = config_module.config_from_dict({}).server.http_listen_port


def copies() -> list[tuple[list[str], str]]:
    """(sources in the build context, destination) of every COPY from the context."""
    out = []
    for word, args in INSTS:
        if word == "COPY" and "--from=" not in args:
            *sources, dest = words(args)
            out.append((sources, dest))
    return out


def test_every_copied_path_exists_and_the_package_is_whole():
    sources = [s for srcs, _ in copies() for s in srcs]
    assert [s for s in sources if not (ROOT / s).exists()] == []
    # what the wheel is built from: every module and package pyproject names is copied
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    wanted = {m + ".py" for m in tool["py-modules"]}
    wanted |= {p.rstrip("*") for p in tool["packages"]["find"]["include"]}
    assert wanted - set(sources) == set()
    assert {"pyproject.toml", "README.md", "LICENSE"} <= set(sources)
    # and .dockerignore keeps none of it out of the build context
    ignored = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line and not line.startswith("#")]
    assert [s for s in sources if any(fnmatch(s, pattern) for pattern in ignored)] == []


def test_base_image_is_a_python_the_project_supports():
    images = [args.split()[0] for word, args in INSTS if word == "FROM"]
    assert images == ["python:3.11-slim", "python:3.11-slim"]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert ">=3.11" in requires.split(",")


def test_runs_as_its_own_user_with_data_on_a_volume_and_the_default_port():
    assert last(INSTS, "USER") == "logstore"
    assert words(last(INSTS, "VOLUME")) == ["/var/lib/logstore"]
    assert last(INSTS, "EXPOSE") == str(DEFAULT_PORT)
    check = last(INSTS, "HEALTHCHECK")
    assert f"http://127.0.0.1:{DEFAULT_PORT}/ready" in check
    # the probe is Python code the image's interpreter runs: it must at least compile
    probe = words(check[check.index("CMD") + 3:].strip())
    assert probe[:2] == ["python", "-c"]
    compile(probe[2], "HEALTHCHECK", "exec")


def test_the_command_parses_to_a_server_on_all_addresses_and_the_volume():
    entry, cmd = words(last(INSTS, "ENTRYPOINT")), words(last(INSTS, "CMD"))
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entry == ["logstore"] and scripts["logstore"] == "app:main"
    # Loki's flags, no subcommand: plain `logstore` serves, as `loki` does
    assert cmd == ["-config.file=/etc/logstore/config.yaml"]
    # the image's config file is one the Containerfile copies from the repository
    in_image = {dest: srcs[0] for srcs, dest in copies() if len(srcs) == 1}
    flag, _, path = cmd[0].partition("=")
    args = [f"{flag}={ROOT / in_image[path]}"]
    # `config` takes serve's flags and prints what serve would run with
    out = subprocess.run([sys.executable, "-m", "app", "config", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    effective = yaml.safe_load(out.stdout)
    assert (effective["server"]["http_listen_address"],
            effective["server"]["http_listen_port"]) == ("0.0.0.0", DEFAULT_PORT)
    assert [effective["common"]["path_prefix"]] == words(last(INSTS, "VOLUME"))
