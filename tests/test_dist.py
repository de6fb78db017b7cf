"""`make dist` builds one file that serves logstore with nothing but the same Python, named
after the CPython version and CPU architecture its compiled libraries are for."""

from __future__ import annotations

import glob
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import absent, free_port, needs
from tests.helpers import now_ns

ROOT = Path(__file__).resolve().parent.parent
SANDBOX = ROOT / "tests" / "deploy" / "unit_sandbox.py"
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}-{platform.machine()}"

pytestmark = needs(shutil.which("make") is not None, "make is not installed")


def require_other_cpython() -> str:
    """other_cpython(), or a skip: a clone elsewhere may have one Python only. Under CI=true
    its absence fails instead, so the two tests that need it cannot leave CI silently green
    (this machine kind has pyenv's 3.12 and 3.13)."""
    other = other_cpython()
    if other is None:
        absent("there is no other CPython on this host (PATH or pyenv)")
    return other


def other_cpython() -> str | None:
    """Another CPython 3 on this host (PATH or pyenv), to build or run the pyz for."""
    candidates = [shutil.which(f"python3.{minor}") for minor in range(12, 16)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1*/bin/python3.1?")))
    for exe in filter(None, candidates):
        # a pyenv shim is on PATH but fails unless its version is selected
        out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip() != str(sys.version_info[:2]):
            return exe
    return None


@pytest.fixture(scope="module")
def pyz(tmp_path_factory) -> Path:
    """One build for the whole module: the interpreter named explicitly, as for another
    CPython; the one running the tests is the venv's, so dist/logstore.pyz is written too."""
    out = subprocess.run(["make", "dist", f"PYTHON_DIST={sys.executable}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"built dist/logstore-{TAG}.pyz and dist/logstore.pyz" in out.stdout
    named = ROOT / "dist" / f"logstore-{TAG}.pyz"
    assert named.read_bytes() == (ROOT / "dist" / "logstore.pyz").read_bytes()
    return ROOT / "dist" / "logstore.pyz"


@pytest.fixture(scope="module")
def shiv_root(tmp_path_factory) -> Path:
    """Where the pyz unpacks (~150 MB), shared by the module's runs: the second one reuses it."""
    return tmp_path_factory.mktemp("shiv")


def clean_env(home: Path, shiv_root: Path) -> dict:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "SHIV_ROOT": str(shiv_root)}


def test_pyz_serves(pyz, shiv_root, tmp_path):
    port = free_port()
    # run from an empty directory with a clean environment: nothing from the checkout helps;
    # under the system call filters of deploy/logstore.service, which runs this pyz (they are
    # read with systemd-analyze: without it, outside CI, unconfined)
    confined = shutil.which("systemd-analyze") is not None
    sandbox = [sys.executable, str(SANDBOX)] if confined else []
    proc = subprocess.Popen([*sandbox, sys.executable, str(pyz), "serve", "--port", str(port),
                             "--data-dir", str(tmp_path / "data")], cwd=tmp_path,
                            env=clean_env(tmp_path, shiv_root), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
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
        if confined:
            assert "\nSeccomp:\t2\n" in Path(f"/proc/{proc.pid}/status").read_text()
        body = {"streams": [{"stream": {"app": "pyz"}, "values": [[str(now_ns()), "hi"]]}]}
        assert httpx.post(url + "/logstore/api/v1/push", json=body).status_code == 204
        r = httpx.get(url + "/logstore/api/v1/label/app/values")
        assert r.json() == {"status": "success", "data": ["pyz"]}
        # queries run in worker processes the pyz starts (a 60-step range: split over two)
        r = httpx.get(url + "/logstore/api/v1/query_range", params={
            "query": 'count_over_time({app="pyz"}[1h])', "start": str(now_ns() - 3600 * 10**9),
            "end": str(now_ns() + 10**9), "step": "60"}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["data"]["result"][0]["values"][-1][1] == "1"
        metrics = httpx.get(url + "/metrics").text
        assert "\nlogstore_query_workers_started_total 2.0\n" in metrics, metrics[-2000:]
        # the web page's files are package data: the pyz carries them
        page = httpx.get(url + "/")
        assert page.status_code == 200 and 'src="ui/app.js"' in page.text
        assert httpx.get(url + "/ui/app.js").status_code == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    # SHIV_ROOT decides where the pyz unpacks: nothing went to ~/.shiv
    assert [p.name.split("_")[0] for p in shiv_root.iterdir() if p.is_dir()] == [pyz.name]
    assert not (tmp_path / ".shiv").exists()


def test_pyz_refuses_another_python(pyz, shiv_root, tmp_path):
    other = require_other_cpython()
    out = subprocess.run([other, str(pyz), "config"], cwd=tmp_path,
                         env=clean_env(tmp_path, shiv_root),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    version = subprocess.run([other, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True).stdout.strip()
    assert out.stderr.startswith(
        "logstore: this pyz holds compiled libraries for cpython-%d%d-" % sys.version_info[:2]
    ), out.stderr
    assert f"not for this Python {version} on {platform.machine()}" in out.stderr
    assert f"make dist PYTHON_DIST={other}" in out.stderr


def test_dist_builds_for_the_interpreter_named(tmp_path):
    """The recipe make would run for another CPython (a dry run: a real build takes ~25 s;
    README.md tells the result of one): its own pip fills the pyz, named for its version."""
    other = require_other_cpython()
    tag, version = subprocess.run(
        [other, "-c", "import platform, sys; v = sys.version_info[:2]; "
                      "print('cp%d%d-%s' % (*v, platform.machine()), '%d.%d' % v)"],
        capture_output=True, text=True).stdout.split()
    out = subprocess.run(["make", "-n", "dist", f"PYTHON_DIST={other}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f'pip="{other} -m pip"' in out.stdout
    assert f"--target build/pyz-{tag} " in out.stdout
    assert f"-o dist/logstore-{tag}.pyz" in out.stdout
    assert f"-p '/usr/bin/env python{version}'" in out.stdout
