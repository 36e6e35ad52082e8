#!/usr/bin/env python3
"""The async frame sizes a Swift executable declares, largest first.

Every async function has an async function pointer (a symbol whose mangled name ends in `Tu`):
a 32-bit relative address of the function and the 32-bit size of the context (its frame) that
the caller allocates from the task's allocator for each call, whatever path the call takes. A
connection's task keeps the allocator's slabs of its deepest request while the connection is
open, so these sizes are what an idle keep-alive connection keeps of the routes it served
(Performance.md, Design notes). Deterministic: they change only with the code, the toolchain and
the resolved packages.

`--check` compares the frames of the request path's functions named in `frames.json` with their
committed sizes, as allocations.py does with malloc counts: a frame more than 10 % larger, or a
function no longer in the executable (renamed, or inlined into its callers), fails (exit 1); a
frame more than 10 % smaller passes with a note to lower the baseline. `--update` writes the
sizes the executable declares now for the functions the baseline names.

    python3 Tests/Benchmarks/frames.py                          # .build/release/gatehouse
    python3 Tests/Benchmarks/frames.py --match 'GatewayMiddleware|CachedStore'
    python3 Tests/Benchmarks/frames.py --check                  # scripts/test, after the release build
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frames.json")
TOLERANCE = 0.10


def sections(binary):
    """(address, file offset, size) of each section with an address."""
    listing = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in listing.splitlines():
        match = re.match(r"\s*\[\s*\d+\]\s+\S+\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if match and int(match.group(1), 16):
            found.append(tuple(int(group, 16) for group in match.groups()))
    return found


def frame_sizes(binary):
    """(size, demangled name) of every async function pointer in `binary`."""
    symbols = []
    for line in subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[2].endswith("Tu"):
            symbols.append((int(fields[0], 16), fields[2]))
    names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(name for _, name in symbols),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    mapped = sections(binary)
    sizes = []
    with open(binary, "rb") as executable:
        for (address, _), name in zip(symbols, names):
            offset = next((address - start + at for start, at, size in mapped if start <= address < start + size), None)
            if offset is None:
                continue
            executable.seek(offset)
            _, size = struct.unpack("<iI", executable.read(8))
            sizes.append((size, name.removeprefix("async function pointer to ")))
    return sorted(sizes, reverse=True)


def compare(sizes, baseline):
    """(report lines, failures) of the frames `sizes` (name to size) against `baseline`."""
    lines, failures = [], []
    for name, expected in baseline.items():
        size = sizes.get(name)
        if expected <= 0:
            failures.append(f"{name}: a baseline of {expected} bytes (run --update)")
            continue
        if size is None:
            failures.append(f"{name}: not in the executable (renamed or inlined: edit frames.json)")
            continue
        change = size / expected - 1
        verdict = ""
        if size > expected * (1 + TOLERANCE):
            verdict = f"  more than {TOLERANCE:.0%} over the baseline"
            failures.append(f"{name}: {size} bytes, baseline {expected} (+{change:.1%})")
        elif change < -TOLERANCE:
            verdict = "  smaller: lower the baseline (--update)"
        lines.append(f"{expected:9d} {size:9d} {change:>+8.1%}  {name}{verdict}")
    return lines, failures


def check(binary, update):
    with open(BASELINE) as file:
        baseline = json.load(file)
    sizes = {}
    for size, name in frame_sizes(binary):
        # Simplified names drop generic arguments, so two specializations can share one; the
        # largest counts (the list is sorted largest first).
        sizes.setdefault(name, size)
    if update:
        missing = [name for name in baseline if name not in sizes]
        if missing:
            sys.exit("not written: not in the executable (edit frames.json):\n  " + "\n  ".join(missing))
        with open(BASELINE, "w") as file:
            json.dump({name: sizes[name] for name in baseline}, file, indent=2, sort_keys=True)
            file.write("\n")
        print(f"baseline written: {len(baseline)} frames")
        return
    lines, failures = compare(sizes, baseline)
    print(f"{'baseline':>9} {'now':>9} {'change':>8}  async frame bytes of the request path")
    print("\n".join(lines))
    if failures:
        sys.exit("frame check failed:\n  " + "\n  ".join(failures))
    print(f"frames: every size within {TOLERANCE:.0%} of the baseline")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", default=".build/release/gatehouse")
    parser.add_argument("--match", default="", help="only functions whose demangled name matches this regular expression")
    parser.add_argument("--top", type=int, default=40, help="how many to print (0: all)")
    parser.add_argument("--check", action="store_true", help="compare the baseline's functions with frames.json")
    parser.add_argument("--update", action="store_true", help="write the baseline's functions' sizes now")
    arguments = parser.parse_args()
    if arguments.check or arguments.update:
        check(arguments.binary, arguments.update)
        return
    rows = [(size, name) for size, name in frame_sizes(arguments.binary)
            if not name.startswith("partial apply") and re.search(arguments.match, name)]
    for size, name in rows[:arguments.top or None]:
        print(f"{size:7d}  {name}")


if __name__ == "__main__":
    main()
