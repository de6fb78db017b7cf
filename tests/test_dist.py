"""`make dist` builds one file that serves logstore with nothing but the same Python."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.helpers import now_ns

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_pyz_serves(tmp_path):
    subprocess.run(["make", "dist"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    pyz = ROOT / "dist" / "logstore.pyz"
    assert pyz.exists()
    port = free_port()
    # run from an empty directory with a clean environment: nothing from the checkout helps
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "SHIV_ROOT": str(tmp_path / "shiv")}
    proc = subprocess.Popen([sys.executable, str(pyz), "serve", "--port", str(port),
                             "--data-dir", str(tmp_path / "data")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read().decode()
            try:
                if httpx.get(url + "/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)  # polling for readiness
        body = {"streams": [{"stream": {"app": "pyz"}, "values": [[str(now_ns()), "hi"]]}]}
        assert httpx.post(url + "/logstore/api/v1/push", json=body).status_code == 204
        r = httpx.get(url + "/logstore/api/v1/label/app/values")
        assert r.json() == {"status": "success", "data": ["pyz"]}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
