"""Core install size (issue 18: "the core install is under 60 MB"): what a user downloads and what
lands on disk for `pip install qoslab` without extras, package by package, so the figure the goal
names is measured the same way each time and the largest packages are named.

Resolves the core dependencies in pyproject.toml for this machine's Python and platform as
wheels from the package index (pip wheel: downloaded, or built for a package that has only
sources), adds qoslab's own wheel, installs them all into a
fresh virtual environment (no index, no extras) and measures its site-packages.

    python benchmarks/install_size.py                    # builds qoslab's wheel (scripts/build-wheel)
    python benchmarks/install_size.py --wheel dist/qoslab-0.1.0-cp311-abi3-manylinux_2_17_x86_64.whl
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_MB = 60.0  # issue 18, decimal megabytes of downloaded wheels


def core_dependencies() -> list[str]:
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def own_wheel(given: str | None, scratch: Path) -> Path:
    if given:
        return Path(given).resolve()
    subprocess.run(["bash", str(ROOT / "scripts" / "build-wheel"), str(scratch / "dist")], check=True,
                   capture_output=True)
    return next((scratch / "dist").glob("qoslab-*.whl"))


def distribution(wheel: Path) -> str:
    """The distribution's normalized name from a wheel's (or a .dist-info folder's) name."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def measure(wheel_arg: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        wheels = scratch / "wheels"
        # Wheels where the index has them; the others (python-hostlist: pure Python) built from sources.
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--prefer-binary", "--wheel-dir", str(wheels),
                        *core_dependencies()], check=True)
        own = own_wheel(wheel_arg, scratch)
        files = sorted(wheels.glob("*.whl")) + [own]
        downloaded = {distribution(w): w.stat().st_size for w in files}
        venv = scratch / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python*/site-packages"))
        # Installed by this interpreter's pip into the new environment: nothing but the wheels.
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                        "--target", str(site), *map(str, files)], check=True)
        # Per distribution, from the files its RECORD lists (sizes as they are on disk).
        installed: dict[str, int] = {}
        for info in site.glob("*.dist-info"):
            files_listed = (row[0] for row in csv.reader((info / "RECORD").read_text().splitlines()) if row)
            installed[distribution(info)] = sum((site / f).stat().st_size for f in files_listed if (site / f).is_file())
    total = sum(downloaded.values())
    return {
        "dependencies": core_dependencies(),
        "qoslab_wheel": own.name,
        "downloaded_bytes": total,
        "downloaded_mb": round(total / 1e6, 1),
        "installed_bytes": sum(installed.values()),
        "installed_mb": round(sum(installed.values()) / 1e6, 1),
        "goal_downloaded_mb": GOAL_MB,
        "by_distribution_downloaded_mb": {k: round(v / 1e6, 2) for k, v in
                                          sorted(downloaded.items(), key=lambda kv: -kv[1])},
        "by_distribution_installed_mb": {k: round(v / 1e6, 2) for k, v in
                                      sorted(installed.items(), key=lambda kv: -kv[1]) if v >= 100_000},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", help="qoslab's wheel (default: build one with scripts/build-wheel)")
    parser.add_argument("--out", default=str(Path(__file__).with_name("install_size.json")))
    args = parser.parse_args(argv)
    figures = measure(args.wheel)
    report = {
        "benchmark": "core install size",
        "machine": {"python": sys.version.split()[0], "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d"),
        **figures,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"core install: {figures['downloaded_mb']} MB downloaded (goal {GOAL_MB:g}), "
          f"{figures['installed_mb']} MB installed; largest: "
          + ", ".join(f"{k} {v}" for k, v in list(figures["by_distribution_downloaded_mb"].items())[:4]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
