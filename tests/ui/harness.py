"""What the web page's tests and bench/ui_screenshots.py share: headless Chromium, and the
data (the first lines of three loghub systems, one stream per (system, level), the level as
loghub parsed the line)."""

from __future__ import annotations

import csv
import json

import shutil

import httpx

from tests.conftest import loghub_file

SYSTEMS = {"Apache": "apache", "HDFS": "hdfs", "Zookeeper": "zookeeper"}
PER_SYSTEM = 200


def loghub_entries() -> list[tuple[dict, str, str]]:
    """(stream labels, level, line) of the first lines of each system, the level from
    loghub's own parse of the line (its _structured.csv)."""
    out = []
    for system, name in SYSTEMS.items():
        lines = loghub_file(system).read_text(encoding="utf-8").splitlines()[:PER_SYSTEM]
        with open(loghub_file(system, ".log_structured.csv"), encoding="utf-8") as f:
            levels = [row["Level"].lower() for row in csv.DictReader(f)][:PER_SYSTEM]
        out += [({"system": name, "job": "loghub"}, level, line)
                for level, line in zip(levels, lines)]
    return out


def loghub_streams(now_ns: int, span_s: int = 600) -> list[tuple[dict, list]]:
    """The entries as push streams, spread evenly over the `span_s` seconds before now."""
    entries = loghub_entries()
    streams: dict[str, tuple[dict, list]] = {}
    for i, (labels, level, line) in enumerate(entries):
        stream = {**labels, "level": level}
        ts = now_ns - span_s * 10**9 + i * ((span_s - 10) * 10**9 // len(entries))
        streams.setdefault(json.dumps(stream, sort_keys=True), (stream, []))[1].append(
            [str(ts), line])
    return list(streams.values())


ADMIN = ("admin", "admin")
VIEWER = ("alice", "alice-pass")  # a Viewer: the org role a new user gets


def grafana_objects(url: str) -> None:
    """Two folders, three dashboards and a Viewer; the folder "Team Payments" is its creator's
    alone (its permissions list no one else), so the Viewer does not see it."""
    def post(path: str, body: dict) -> dict:
        r = httpx.post(url + path, json=body, auth=ADMIN)
        assert r.status_code == 200, r.text
        return r.json()

    post("/api/admin/users", {"name": "Alice", "login": VIEWER[0], "password": VIEWER[1]})
    post("/api/folders", {"uid": "infra", "title": "Infrastructure"})
    post("/api/folders", {"uid": "payments", "title": "Team Payments"})
    post("/api/folders/payments/permissions", {"items": []})
    for uid, title, folder, tags in [("logs", "Log volume", "", ["logs", "prod"]),
                                     ("hdfs", "HDFS blocks", "infra", ["hdfs", "storage"]),
                                     ("zk", "ZooKeeper quorum", "infra", ["zookeeper"]),
                                     ("pay", "Payments API", "payments", ["prod"])]:
        post("/api/dashboards/db", {"folderUid": folder, "dashboard": {
            "uid": uid, "title": title, "tags": tags, "panels": []}})


def push(server, streams: list[tuple[dict, list]], tenant: str | None = None) -> None:
    body = {"streams": [{"stream": s, "values": v} for s, v in streams]}
    headers = {"X-Scope-OrgID": tenant} if tenant else {}
    r = httpx.post(server.url + "/logstore/api/v1/push", json=body, headers=headers, timeout=30)
    assert r.status_code == 204, r.text


def start_chromium(width: int = 1400, height: int = 1000, dark: bool = False):
    """Headless Chromium under Selenium, its console kept for the tests to read."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions",
                "--disable-background-networking"):
        opts.add_argument(arg)
    if dark:
        opts.add_argument("--blink-settings=preferredColorScheme=0")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver")))
    driver.set_page_load_timeout(20)
    return driver
