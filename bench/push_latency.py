"""One-line push latency with and without four heavy queries, on a fresh server with the
soak's config plus any extra YAML (to compare settings), while two pushers run.

    .venv/bin/python bench/push_latency.py ["storage:\\n  sealing_enabled: false\\n"]
    .venv/bin/python bench/push_latency.py --gil-profile=/tmp/idle.txt   # py-spy --gil, idle

Pushes the soak's 300k heavy lines, starts bench/soak.py's two pushers, waits 30 s, probes a
one-line push every 10 ms for 20 s, then again for 20 s while four heavy quantile_over_time
queries run; prints p50 / p99 of both, the lines the pushers got acknowledged and the median
query time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import soak  # noqa: E402
from ingest import free_port, start_server  # noqa: E402


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--gil-profile=")]
    profile = next((a.split("=", 1)[1] for a in sys.argv[1:]
                    if a.startswith("--gil-profile=")), None)
    extra = args[0].replace("\\n", "\n") if args else ""
    work = Path(tempfile.mkdtemp(prefix="push-latency-"))
    (work / "data").mkdir()
    port = free_port()
    proc = start_server(work / "data", port, soak.CONFIG + extra)
    url = f"http://127.0.0.1:{port}"
    try:
        soak.heavy_data(url)
        stop = threading.Event()
        pushers = [soak.Pusher(url, f"p{i}", stop) for i in range(2)]
        for p in pushers:
            p.start()
        time.sleep(30)
        spy = None
        if profile:
            # which threads hold the GIL while the idle probes run: the granian worker's
            spy = subprocess.Popen(
                [str(Path(sys.executable).parent / "py-spy"), "record", "--gil", "-r", "200",
                 "-d", "20", "-f", "raw", "-o", profile, "-p",
                 subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                text=True).stdout.split()[0]],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        idle = soak.probe_latency(url, 20)
        if spy is not None:
            spy.wait()
        heavy: list[float] = []
        queries = threading.Thread(target=lambda: heavy.extend(soak.heavy_queries(url, 25)))
        queries.start()
        time.sleep(3)
        busy = soak.probe_latency(url, 20)
        queries.join()
        stop.set()
        for p in pushers:
            p.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    print(f"extra config {extra!r}: push p50 / p99 idle {soak.pct(idle, .5):.1f} / "
          f"{soak.pct(idle, .99):.1f} ms, with 4 heavy queries {soak.pct(busy, .5):.1f} / "
          f"{soak.pct(busy, .99):.1f} ms; pushers acked {sum(p.acked for p in pushers):,} "
          f"lines; each query {sorted(heavy)[len(heavy) // 2] if heavy else 0:.1f} s")


if __name__ == "__main__":
    main()
