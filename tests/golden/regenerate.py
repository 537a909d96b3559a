"""Rewrites the golden outputs from the scenarios and prints what changed.

    python tests/golden/regenerate.py            # every scenario
    python tests/golden/regenerate.py NAME ...   # only these (folder names under tests/golden)
    python tests/golden/regenerate.py --check    # print the differences, write nothing

Run it only for a deliberate model change, and say in the commit what moved and why
(docs/design/golden.md): an output that moves for any other reason is a bug.
"""

from __future__ import annotations

import argparse
import sys
import time

import harness


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="golden scenarios to regenerate (default: all)")
    parser.add_argument("--check", action="store_true", help="only print the differences")
    args = parser.parse_args(argv)
    known = harness.names()
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"no golden scenario {', '.join(unknown)}; known: {', '.join(known)}")
    changed = 0
    for name in args.names or known:
        start = time.perf_counter()
        new = harness.produce(name)
        seconds = time.perf_counter() - start
        found = harness.differences(harness.stored(name), new)
        print(f"{name}: {'unchanged' if not found else f'{len(found)} differences'} ({seconds:.2f} s)")
        for line in found:
            print(f"  {line}")
        if found:
            changed += 1
            if not args.check:
                harness.write(name, new)
    verb = "differ" if args.check else "rewritten"
    print(f"{changed} of {len(args.names or known)} scenarios {verb}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
