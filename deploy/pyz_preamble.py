"""Run by the pyz (shiv's preamble) before logstore starts: the pyz carries compiled libraries
for one CPython version and CPU architecture, and another interpreter would fail later with an
ImportError that names neither. shiv's bootstrap sets `site_packages`."""

import importlib.machinery
import platform
import sys

# "cpython-311-x86_64-linux-gnu" from ".cpython-311-x86_64-linux-gnu.so"
ours = {s.split(".")[1] for s in importlib.machinery.EXTENSION_SUFFIXES if s.count(".") == 2}
built_for = {p.name.split(".")[1] for p in site_packages.glob("msgspec/_core.*.so")}  # noqa: F821
if built_for and not built_for & ours:
    print(f"logstore: this pyz holds compiled libraries for {', '.join(sorted(built_for))}, "
          f"not for this Python {platform.python_version()} on {platform.machine()}; run it "
          f"with the Python it was built for, or build one for this Python with "
          f"`make dist PYTHON_DIST={sys.executable}`", file=sys.stderr)
    raise SystemExit(2)
