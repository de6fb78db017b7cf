"""deploy/logstore.service: systemd accepts it as written, and the command it starts parses
to a server on /var/lib/logstore, the StateDirectory systemd makes for it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import yaml

from tests.conftest import needs
from tests.deploy.unit_file import ROOT, UNIT, exec_start, unit_settings

ANALYZE = "systemd-analyze"


@needs(shutil.which(ANALYZE) is not None,
       "systemd-analyze is not installed (Debian package systemd)")
def test_systemd_analyze_verify_is_clean(tmp_path):
    python, pyz = exec_start()[:2]
    # verify requires ExecStart's program to exist: point it at this interpreter and a file
    # standing in for the pyz, nothing else changed
    (tmp_path / "logstore.pyz").write_bytes(b"")
    text = UNIT.read_text().replace(f"ExecStart={python} {pyz}",
                                    f"ExecStart={sys.executable} {tmp_path / 'logstore.pyz'}")
    assert text != UNIT.read_text()
    unit = tmp_path / "logstore.service"
    unit.write_text(text)
    out = subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True,
                         timeout=60)
    # an unknown or misspelt key is only a warning (exit 0): the output must be empty too
    assert (out.returncode, out.stdout + out.stderr) == (0, "")


def test_the_unit_keeps_data_and_unpacked_pyz_where_systemd_lets_it_write():
    s = unit_settings(UNIT.read_text())
    assert s["Service.StateDirectory"] == ["logstore"]
    assert s["Service.CacheDirectory"] == ["logstore"]
    assert "SHIV_ROOT=%C/logstore" in s["Service.Environment"]  # %C: /var/cache
    assert s["Service.ProtectSystem"] == ["strict"]  # everything else is read-only
    argv = exec_start()
    assert argv[0] == "/usr/bin/python3.11" and argv[1].endswith(".pyz")
    assert argv[2:] == ["-config.file=/etc/logstore/config.yaml",
                        "-common.path-prefix=/var/lib/logstore"]


def test_the_units_command_line_parses_with_the_shipped_config():
    # the same flags through `config`, which prints what `serve` would run with
    args = exec_start()[2:]
    args = [a.replace("/etc/logstore/config.yaml", str(ROOT / "deploy" / "config.yaml"))
            for a in args]
    assert args != exec_start()[2:]
    out = subprocess.run([sys.executable, "-m", "app", "config", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    effective = yaml.safe_load(out.stdout)
    assert effective["common"]["path_prefix"] == "/var/lib/logstore"
    assert (effective["server"]["http_listen_address"],
            effective["server"]["http_listen_port"]) == ("0.0.0.0", 3100)
