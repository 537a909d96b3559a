#!/usr/bin/env python
"""Calibrates the skeleton presets (python/qoslab/skeleton_presets.py) against their targets and
prints what the alone runs measure (the table in docs/skeletons.md, "Calibration").

    python scripts/calibrate_skeletons.py                      # every preset, print only
    python scripts/calibrate_skeletons.py --only savoie-1540   # one preset (or preset:kind)
    python scripts/calibrate_skeletons.py --write              # also store compute_us in the presets

Each (preset, kind) runs the skeleton alone at the preset's scale a few times (seconds to about a
minute each on one core; NAS FT class D dominates).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from qoslab.calibration import calibrate, preset_kinds, sensitivity
from qoslab.skeleton_presets import reference

PRESETS_FILE = Path(__file__).resolve().parent.parent / "python" / "qoslab" / "skeleton_presets.py"


def write_compute(text: str, preset: str, kind: str, compute_us: float) -> str:
    """`text` with `kind`'s compute_us inside `preset`'s block replaced."""
    block = text.index(f'"{preset}": {{')
    entry = text.index(f'"{kind}": {{', block)
    end = text.index("}", entry)
    line = text[entry:end]
    new, n = re.subn(r'"compute_us": [0-9.e+-]+', f'"compute_us": {compute_us}', line)
    if n != 1:
        raise ValueError(f"no compute_us for {preset}/{kind} in {PRESETS_FILE}")
    return text[:entry] + new + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], help="preset or preset:kind (repeatable)")
    parser.add_argument("--write", action="store_true", help="store the calibrated compute_us in skeleton_presets.py")
    args = parser.parse_args()

    pairs = [(p, k) for p, k in preset_kinds()
             if not args.only or p in args.only or f"{p}:{k}" in args.only]
    if not pairs:
        parser.error(f"no preset matches {args.only}")
    text = PRESETS_FILE.read_text()
    print("| preset | kind | ranks | target | compute_us | iteration (us) | MPI fraction | fraction at compute +-2% "
          "| bytes/rank/iter | msgs/rank/iter |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for preset, kind in pairs:
        ref = reference(preset, kind)
        compute = round(calibrate(preset, kind)[0], 1)
        # The stored value, and 2% either side of it (the middle run is what the table shows).
        runs = sensitivity(preset, kind, compute)
        run, fractions = runs[1], [r.mpi_fraction for r in runs]
        target = (f"{ref.iteration_us:,.0f} us/iter" if ref.iteration_us is not None
                  else f"{ref.mpi_fraction:.3f} in MPI")
        print(f"| {preset} | {kind} | {ref.ranks} | {target} ({ref.basis}) | {compute:,.1f} "
              f"| {run.iteration_us:,.1f} | {run.mpi_fraction:.3f} | {min(fractions):.3f}-{max(fractions):.3f} "
              f"| {run.bytes_per_rank:,.0f} | {run.messages_per_rank:,.1f} |", flush=True)
        text = write_compute(text, preset, kind, compute)
    if args.write:
        PRESETS_FILE.write_text(text)
        print(f"wrote {PRESETS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
