"""The web page's weight and its time to first result on the benchmark set (issue 29).

    .venv/bin/python bench/ingest.py --lines 1000000 --keep /tmp/qbench --no-report
    PYTHONPATH=. .venv/bin/python bench/ui_page.py --dir /tmp/qbench [--runs 3]

Page weight: the bytes of every file the page loads (index.html, the ES modules, the
stylesheet), as served, uncompressed; nothing else is fetched. Time to first result: from
`driver.get()` of a page URL holding the query (a shared link) to the first log line on
screen (or the metric chart), in headless Chromium on the same machine as the server; the
histogram's own query answers after the lines. Median of `--runs` loads after one warm-up.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from background import wait_for_background  # noqa: E402
from report import machine, table, update_section  # noqa: E402
from tests.ui.harness import start_chromium  # noqa: E402

QUERIES = [
    ("1,000 newest lines, 24 h", '{env="bench"}', 1000, "#lines > .row:first-child"),
    ("5,000 newest lines, 24 h", '{env="bench"}', 5000, "#lines > .row:first-child"),
    ("line filter, 24 h", '{env="bench"} |= "error"', 1000, "#lines > .row:first-child"),
    ("metric by job, 24 h", 'sum by (job) (count_over_time({env="bench"}[5m]))', 1000,
     "#chart polyline"),
]


def page_weight(port: int) -> tuple[int, list[tuple[str, int]]]:
    import httpx

    base = f"http://127.0.0.1:{port}/"
    files = [("index.html", len(httpx.get(base).content))]
    from routes.ui import ASSETS
    files += [(f"ui/{n}", len(httpx.get(base + "ui/" + n).content))
              for n in sorted(ASSETS) if n != "index.html"]
    return sum(b for _, b in files), files


def first_result(driver, port: int, query: str, limit: int, css: str) -> tuple[float, float, str]:
    url = f"http://127.0.0.1:{port}/?" + urlencode({"q": query, "from": "now-24h",
                                                    "limit": limit})
    t0 = time.perf_counter()
    driver.get(url)
    WebDriverWait(driver, 120, 0.01).until(lambda d: d.find_elements(By.CSS_SELECTOR, css))
    first = time.perf_counter() - t0
    if css.startswith("#lines"):
        WebDriverWait(driver, 120, 0.01).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#volume rect.bar:first-of-type"))
    volume = time.perf_counter() - t0
    return first * 1000, volume * 1000, driver.find_element(By.ID, "status").text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="the --keep directory of bench/ingest.py")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    import ingest

    data_dir = Path(args.dir) / "data"
    port = ingest.free_port()
    proc = ingest.start_server(data_dir, port)
    try:
        wait_for_background(data_dir / "logstore.db")
        total, files = page_weight(port)
        driver = start_chromium()
        rows = []
        try:
            for name, query, limit, css in QUERIES:
                first_result(driver, port, query, limit, css)  # warm-up
                runs = [first_result(driver, port, query, limit, css) for _ in range(args.runs)]
                rows.append([name, "`" + query.replace("|", "\\|") + "`", limit,
                             f"{statistics.median(r[0] for r in runs):.0f} ms",
                             f"{statistics.median(r[1] for r in runs):.0f} ms", runs[-1][2]])
        finally:
            driver.quit()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    weight = table(["file", "bytes"], [[n, f"{b:,}"] for n, b in files] + [["total", f"{total:,}"]])
    timing = table(["query", "LogQL", "limit", "first result (median)", "with histogram",
                    "the page's status line"], rows)
    print(weight, timing, sep="\n")
    if args.no_report:
        return
    update_section("Issue 29: page weight", (
        f"Command: `PYTHONPATH=. .venv/bin/python bench/ui_page.py --dir DIR --runs {args.runs}`"
        " after `bench/ingest.py --lines 1000000 --keep DIR`. The page is plain ES modules and "
        "one stylesheet, no third-party code and no build step; these are all the bytes it "
        "loads, uncompressed (nothing is fetched from elsewhere).\n\n" + weight))
    update_section("Issue 29: time to first result", (
        f"Machine: {machine()}; server, browser (headless Chromium) and data set (1,000,000 "
        "lines over 24 h) on it. From loading a shared link holding the query to the first "
        f"line on screen, median of {args.runs} after a warm-up; \"with histogram\" waits for "
        "the volume bars too (a second query, `sum by (detected_level) (count_over_time(...))`, "
        "run beside the lines). The status line is the page's own count and time of the "
        "query.\n\n" + timing))


if __name__ == "__main__":
    main()
