#!/usr/bin/env python3
"""The async frame sizes a Swift executable declares, largest first.

Every async function has an async function pointer (a symbol whose mangled name ends in `Tu`):
a 32-bit relative address of the function and the 32-bit size of the context (its frame) that
the caller allocates from the task's allocator for each call, whatever path the call takes. A
connection's task keeps the allocator's slabs of its deepest request while the connection is
open, so these sizes are what an idle keep-alive connection keeps of the routes it served
(Performance.md, Design notes). Deterministic: they change only with the code and the toolchain.

    python3 Tests/Benchmarks/frames.py                          # .build/release/gatehouse
    python3 Tests/Benchmarks/frames.py --match 'GatewayMiddleware|CachedStore'
"""

import argparse
import re
import struct
import subprocess


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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", default=".build/release/gatehouse")
    parser.add_argument("--match", default="", help="only functions whose demangled name matches this regular expression")
    parser.add_argument("--top", type=int, default=40, help="how many to print (0: all)")
    arguments = parser.parse_args()
    rows = [(size, name) for size, name in frame_sizes(arguments.binary)
            if not name.startswith("partial apply") and re.search(arguments.match, name)]
    for size, name in rows[:arguments.top or None]:
        print(f"{size:7d}  {name}")


if __name__ == "__main__":
    main()
