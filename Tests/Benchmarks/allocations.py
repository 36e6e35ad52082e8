#!/usr/bin/env python3
"""Allocations per request on the gateway's in-process hot paths, against the committed baseline.

Builds `gatehouse-bench-allocations` (Tests/Benchmarks/Allocations, ordo-one/benchmark with its
malloc interposer) with the benchmark suite's release flags, runs it standalone, reads each
benchmark's median malloc count per operation and compares it with `allocations.json`:

- a count more than 10 % over its baseline fails (exit 1), and so does a benchmark that is
  missing from the run or from the baseline;
- a count more than 10 % under its baseline passes with a note to lower the baseline, so that
  an improvement is kept by the next change.

Counts do not depend on the machine's speed: the medians repeat within about 1 % from run to
run, on a loaded machine too. They do depend on the toolchain and the resolved packages;
`--update` rewrites the baseline. A count of zero fails: the interposer counted nothing.

Usage: python3 Tests/Benchmarks/allocations.py [--update] [--no-build]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BASELINE = os.path.join(ROOT, "Tests", "Benchmarks", "allocations.json")
PRODUCT = "gatehouse-bench-allocations"
TOLERANCE = 0.10


def over_tolerance(count, baseline):
    """More than TOLERANCE over the baseline (a count of exactly +10 % is within it)."""
    return count > baseline * (1 + TOLERANCE)


def build():
    # The flags of Tests/Benchmarks/run: the modules are shared with the benchmark suite's build.
    subprocess.run(["swift", "build", "-c", "release", "--static-swift-stdlib", "--product", PRODUCT],
                   cwd=ROOT, check=True, stdout=sys.stderr)
    path = subprocess.run(["swift", "build", "-c", "release", "--static-swift-stdlib", "--show-bin-path"],
                          cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    return os.path.join(path, PRODUCT)


def parse(output):
    """Each benchmark's median of `Malloc (total)` from the runner's standalone report:
    `Debug results for NAME:`, then per metric a percentile table of `value percentile …` rows."""
    counts = {}
    name = None
    metric = None
    for line in output.splitlines():
        found = re.match(r"Debug results for (.+):$", line)
        if found:
            name, metric = found.group(1), None
            continue
        if line.endswith(":") and not line.startswith(" "):
            metric = line[:-1]
            continue
        row = re.match(r"\s+([0-9.]+)\s+([0-9.]+)\s", line)
        if name and metric == "Malloc (total)" and row and float(row.group(2)) >= 0.5 and name not in counts:
            counts[name] = int(float(row.group(1)))
    return counts


def run(binary):
    # The gateway's JSON log lines go to standard error: kept aside, shown when the run fails.
    with tempfile.TemporaryFile(mode="w+") as logs:
        finished = subprocess.run([binary], cwd=ROOT, stdout=subprocess.PIPE, stderr=logs, text=True, timeout=600)
        if finished.returncode != 0:
            logs.seek(0)
            sys.stderr.write("".join(logs.readlines()[-20:]))
            sys.exit(f"{PRODUCT} exited with status {finished.returncode}")
    return parse(finished.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write this run's counts as the baseline")
    parser.add_argument("--no-build", action="store_true", help="run the binary the last release build left")
    arguments = parser.parse_args()
    binary = (os.path.join(ROOT, ".build", "release", PRODUCT) if arguments.no_build else build())
    counts = run(binary)
    if not counts:
        sys.exit(f"{PRODUCT} reported no malloc counts")
    if arguments.update:
        if any(count <= 0 for count in counts.values()):
            sys.exit(f"not written: a count of zero ({counts}); the interposer counted nothing")
        with open(BASELINE, "w") as file:
            json.dump(counts, file, indent=2, sort_keys=True)
            file.write("\n")
        print(f"baseline written: {counts}")
        return
    with open(BASELINE) as file:
        baseline = json.load(file)
    failures = [f"{name}: no mallocs counted" for name, count in counts.items() if count <= 0]
    print(f"{'benchmark':<14} {'baseline':>9} {'now':>9} {'change':>8}   mallocs per operation (median)")
    for name in sorted(set(baseline) | set(counts)):
        if name not in counts:
            failures.append(f"{name}: in the baseline but not measured")
            continue
        if name not in baseline:
            failures.append(f"{name}: measured ({counts[name]}) but not in the baseline; run with --update")
            continue
        change = counts[name] / baseline[name] - 1
        verdict = ""
        if over_tolerance(counts[name], baseline[name]):
            verdict = f"  more than {TOLERANCE:.0%} over the baseline"
            failures.append(f"{name}: {counts[name]} mallocs, baseline {baseline[name]} (+{change:.1%})")
        elif change < -TOLERANCE:
            verdict = "  fewer: lower the baseline (--update)"
        print(f"{name:<14} {baseline[name]:>9} {counts[name]:>9} {change:>+8.1%}{verdict}")
    if failures:
        sys.exit("allocation check failed:\n  " + "\n  ".join(failures))
    print(f"allocations: every count within {TOLERANCE:.0%} of the baseline")


if __name__ == "__main__":
    main()
