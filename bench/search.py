"""Dashboard search latency: 10,000 dashboards in 500 folders, searched over HTTP.

Builds the data set through the same service functions the API uses (one transaction), then
starts the app in-process and times `GET /api/search` through the ASGI stack (routing, auth,
SQL, hit building, JSON) for a title query, a tag query and permission-filtered Viewer queries.
Prints a table and writes the `## Dashboard search (bench/search.py)` section of
bench/REPORT.md.

    .venv/bin/python bench/search.py [--dashboards 10000] [--folders 500] [--runs 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from litestar.testing import TestClient  # noqa: E402

import config as config_module  # noqa: E402
from app import create_app  # noqa: E402
from report import machine, table, update_section  # noqa: E402
from services.grafana import identity as ident_svc  # noqa: E402
from services.grafana import objects  # noqa: E402
from services.grafana.auth import bootstrap  # noqa: E402
from services.grafana.common import Caller  # noqa: E402
from services.grafana.perms import replace_entries  # noqa: E402
from storage.db import Database  # noqa: E402

WORDS = ["api", "latency", "errors", "cpu", "memory", "disk", "network", "queue", "cache",
         "database", "gateway", "billing", "auth", "search", "ingest", "storage", "kafka",
         "redis", "postgres", "nginx", "frontend", "backend", "batch", "jobs", "alerts"]
TAGS = [f"team-{i}" for i in range(30)] + ["prod", "staging", "dev", "infra", "app", "db",
                                           "slo", "k8s", "vm", "edge"]


def build(data_dir: Path, dashboards: int, folders: int, seed: int) -> dict:
    """Folders: a quarter top-level, a quarter one level below, half two levels below; dashboards
    spread evenly. A fifth of the top-level folders are restricted to admins (their role
    defaults replaced), so the Viewer's filter has something to remove."""
    rng = random.Random(seed)
    db = Database(str(data_dir), synchronous="off")
    db.open()
    admin = Caller(user_id=1, login="admin", org_id=1, role="Admin", is_server_admin=True)

    def fill(conn):
        bootstrap(conn, "admin", "admin")
        top = max(1, folders // 4)
        uids: list[str] = []
        for i in range(folders):
            if i < top:
                parent = None
            elif i < 2 * top:
                parent = uids[rng.randrange(0, top)]
            else:
                parent = uids[rng.randrange(top, 2 * top)]
            uid = f"f{i:04d}"
            objects.create_folder(conn, admin, objects.CreateFolder(
                uid=uid, title=f"{rng.choice(WORDS).title()} folder {i}", parentUid=parent))
            uids.append(uid)
        for i in range(top // 5):
            replace_entries(conn, admin, objects.store.by_uid(conn, 1, uids[i]), [])
        for i in range(dashboards):
            title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} {i}"
            objects.save_dashboard(conn, admin, objects.SaveDashboard(
                dashboard={"uid": f"d{i:05d}", "title": title,
                           "tags": rng.sample(TAGS, 3), "panels": []},
                folderUid=uids[i % folders]))
        sa = ident_svc.create_service_account(conn, admin, ident_svc.CreateServiceAccount(
            name="viewer", role="Viewer"))
        return ident_svc.create_token(conn, admin, sa["id"], ident_svc.CreateToken(name="t"))

    started = time.perf_counter()
    token = db.write_sync(fill)
    build_s = time.perf_counter() - started
    db.close()
    return {"viewer_token": token["key"], "build_s": build_s}


def measure(client: TestClient, path: str, headers: dict, runs: int) -> tuple[list[float], int]:
    r = client.get(path, headers=headers)
    assert r.status_code == 200, r.text
    hits = len(r.json())
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = client.get(path, headers=headers)
        times.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200
    return times, hits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dashboards", type=int, default=10_000)
    ap.add_argument("--folders", type=int, default=500)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-report", action="store_true", help="print only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        built = build(data_dir, args.dashboards, args.folders, args.seed)
        cfg = config_module.config_from_dict({"common": {"path_prefix": str(data_dir)},
                                              "grafana": {"admin_password": "admin"}})
        admin = {"Authorization": "Basic YWRtaW46YWRtaW4="}
        viewer = {"Authorization": f"Bearer {built['viewer_token']}"}
        cases = [
            ("title query (admin)", "/api/search?query=latency", admin),
            ("tag query (admin)", "/api/search?tag=team-7", admin),
            ("two tags, dashboards only (admin)", "/api/search?tag=prod&tag=slo&type=dash-db",
             admin),
            ("title query (Viewer, permission-filtered)", "/api/search?query=latency", viewer),
            ("tag query (Viewer, permission-filtered)", "/api/search?tag=team-7", viewer),
            ("no filter, limit=100 (Viewer)", "/api/search?limit=100", viewer),
            ("no filter, first page of 1000 (Viewer)", "/api/search", viewer),
        ]
        rows = []
        with TestClient(create_app(cfg)) as client:
            for name, path, headers in cases:
                times, hits = measure(client, path, headers, args.runs)
                times.sort()
                rows.append([name, f"`{(path.split('?', 1) + [''])[1]}`", hits,
                             f"{statistics.median(times):.2f}",
                             f"{times[int(len(times) * 0.95) - 1]:.2f}"])
    headers = ["query", "parameters", "hits", "median ms", "p95 ms"]
    print(table(headers, rows))
    command = ("`.venv/bin/python bench/search.py --dashboards "
               f"{args.dashboards} --folders {args.folders} --runs {args.runs}`")
    print(f"\nbuilt {args.dashboards} dashboards in {args.folders} folders in "
          f"{built['build_s']:.1f} s")
    if not args.no_report:
        update_section("Dashboard search (bench/search.py)", "\n".join([
            f"Command: {command}", "",
            f"Machine: {machine()}; in-process ASGI client (no network), SQLite on local disk.",
            "",
            f"Data: {args.dashboards:,} dashboards (3 tags each from 40) in {args.folders} "
            "folders (a quarter top-level, a quarter one level down, half two levels down); a fifth of the top-level folders "
            "are restricted to admins. Each query runs once to warm up, then "
            f"{args.runs} times; latency covers routing, authentication, SQL, hit building "
            "and JSON encoding. Aim: under 20 ms.", "",
            table(headers, rows)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
