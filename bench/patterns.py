"""Pattern grouping accuracy per loghub system, logstore's miner next to drain3 and Drain's
published figure.

    .venv/bin/python bench/patterns.py [--no-report]

For each of the 16 loghub systems (../shared/data/loghub, 2,000 lines each with the
ground-truth template of every line), the message part of each line (the `Content` column,
as the loghub benchmark feeds parsers) goes through a miner; grouping accuracy is the share
of lines whose mined group holds exactly the lines of their ground-truth group (Zhu et al.,
"Tools and Benchmarks for Automated Log Parsing", ICSE-SEIP 2019). Also: every mined
pattern is checked to match, as a `|>` filter, every line of its group.

drain3 (PyPI) runs with its best setting found here: masking of IPs, hex and numbers,
similarity 0.7, depth 4, extra delimiters `=`, `:`, `,`. The published Drain figures use a
hand-written regex list and threshold per system; logstore's miner and drain3 use one
setting for all.
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report import machine, table, update_section  # noqa: E402
from services.patterns.miner import Miner  # noqa: E402

LOGHUB = ROOT.parent / "shared" / "data" / "loghub"
SYSTEMS = ["Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "HealthApp", "Linux", "Mac",
           "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows", "Zookeeper"]
# Drain's grouping accuracy per system as published (Zhu et al. 2019, Table III)
DRAIN = {"Android": 0.911, "Apache": 1.0, "BGL": 0.963, "HDFS": 0.998, "HPC": 0.887,
         "Hadoop": 0.948, "HealthApp": 0.780, "Linux": 0.690, "Mac": 0.787, "OpenSSH": 0.788,
         "OpenStack": 0.733, "Proxifier": 0.527, "Spark": 0.920, "Thunderbird": 0.955,
         "Windows": 0.997, "Zookeeper": 0.967}


def load(system: str) -> tuple[list[str], list[str]]:
    path = LOGHUB / system / f"{system}_2k.log_structured.csv"
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.DictReader(f))
    return [r["Content"] for r in rows], [r["EventId"] for r in rows]


def accuracy(truth: list[str], mined: list[int]) -> float:
    groups: dict[int, list[int]] = collections.defaultdict(list)
    for i, g in enumerate(mined):
        groups[g].append(i)
    sizes = collections.Counter(truth)
    right = 0
    for members in groups.values():
        kinds = {truth[i] for i in members}
        if len(kinds) == 1 and sizes[truth[members[0]]] == len(members):
            right += len(members)
    return right / len(truth)


def logstore_miner(lines: list[str]) -> tuple[list[int], Miner]:
    miner = Miner()
    return [miner.add(line)[0].id for line in lines], miner


def drain3_miner(lines: list[str]) -> list[int]:
    from drain3 import TemplateMiner
    from drain3.masking import MaskingInstruction
    from drain3.template_miner_config import TemplateMinerConfig

    b, e = r"((?<=[^A-Za-z0-9])|^)", r"((?=[^A-Za-z0-9])|$)"
    cfg = TemplateMinerConfig()
    cfg.masking_instructions = [
        MaskingInstruction(b + r"(\d+\.){3}\d+(:\d+)?" + e, "IP"),
        MaskingInstruction(b + r"0x[a-fA-F0-9]+" + e, "HEX"),
        MaskingInstruction(b + r"([\-\+]?\d+)" + e, "NUM")]
    cfg.drain_sim_th, cfg.drain_depth = 0.7, 4
    cfg.drain_extra_delimiters = ["=", ":", ","]
    cfg.profiling_enabled = False
    tm = TemplateMiner(config=cfg)
    return [tm.add_log_message(line)["cluster_id"] for line in lines]


def patterns_match(lines: list[str], mined: list[int], miner: Miner) -> float:
    """Share of lines their group's pattern matches as `|>` does."""
    from logql.pipeline.line import pattern_predicate
    by_id = {c.id: pattern_predicate(c.pattern()) for c in miner.clusters}
    return sum(1 for line, g in zip(lines, mined) if by_id[g](line)) / len(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    if not LOGHUB.is_dir():
        raise SystemExit(f"loghub samples not found at {LOGHUB}")
    try:
        import drain3  # noqa: F401
        have_drain3 = True
    except ImportError:
        have_drain3 = False
    rows, ours_all, theirs_all, match_all = [], [], [], []
    took = {"logstore": 0.0, "drain3": 0.0}
    for system in SYSTEMS:
        lines, truth = load(system)
        began = time.perf_counter()
        mined, miner = logstore_miner(lines)
        took["logstore"] += time.perf_counter() - began
        ours = accuracy(truth, mined)
        matched = patterns_match(lines, mined, miner)
        theirs = None
        if have_drain3:
            began = time.perf_counter()
            theirs = accuracy(truth, drain3_miner(lines))
            took["drain3"] += time.perf_counter() - began
            theirs_all.append(theirs)
        ours_all.append(ours)
        match_all.append(matched)
        rows.append([system, f"{ours:.3f}", "-" if theirs is None else f"{theirs:.3f}",
                     f"{DRAIN[system]:.3f}", str(len(miner.clusters)),
                     str(len(set(truth))), f"{matched:.1%}"])
    avg = sum(ours_all) / len(ours_all)
    rows.append(["**average**", f"**{avg:.3f}**",
                 f"{sum(theirs_all) / len(theirs_all):.3f}" if theirs_all else "-",
                 f"{sum(DRAIN.values()) / len(DRAIN):.3f}", "", "",
                 f"{sum(match_all) / len(match_all):.1%}"])
    text = table(["system", "logstore", "drain3 (one setting)", "Drain (published, tuned)",
                  "templates mined", "templates (truth)", "lines its pattern matches"], rows)
    lines_total = 2000 * len(SYSTEMS)
    speed = (f"Speed: logstore {lines_total / took['logstore']:,.0f} lines/s"
             + (f", drain3 {lines_total / took['drain3']:,.0f} lines/s" if have_drain3 else "")
             + " (one core, the miners alone).")
    print(text)
    print(speed)
    if not args.no_report:
        update_section("Pattern grouping accuracy (bench/patterns.py)",
                       f"Command: `.venv/bin/python bench/patterns.py`\n\n"
                       f"Machine: {machine()}.\n\n{text}\n\n{speed}")


if __name__ == "__main__":
    main()
