#!/usr/bin/env python3
"""The task-stack slabs a connection keeps after one request, traced from the running server.

Hummingbird serves a keep-alive connection's requests in one task, and Swift's task allocator
keeps the slabs that task's deepest request needed until the connection closes (Performance.md,
What stops the missed goals). This starts the release `gatehouse serve` (development mode, a
fresh data folder, nothing configured) or the floor row's bare Hummingbird route
(`gatehouse-bench-floor`), attaches gdb with breakpoints on the runtime's slab allocator
(`StackAllocator::alloc`: which task, what size, which function asked) and on
`swift_task_dealloc`, answers one request on a fresh connection, detaches, and replays the
connection task's allocations through a model of the allocator: the slabs it kept, their bytes,
and the frames each slab held at the request's deepest point. The model follows the runtime's
`StackAllocator` (slabs of 984 bytes after their 32-byte header, 16-byte allocation headers, a
larger allocation in a slab of its own size); its slab count and bytes are what the traced
mallocs of the allocator were. Needs gdb and ptrace rights (root), and the release build
(`Tests/Benchmarks/run` builds it).

    python3 Tests/Benchmarks/slabs.py                # the gateway, GET /healthz
    python3 Tests/Benchmarks/slabs.py --floor        # the bare Hummingbird route
    python3 Tests/Benchmarks/slabs.py --path /readyz --frames
"""

import argparse
import base64
import collections
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from bench import free_port, wait_http  # Tests/Benchmarks/bench.py: the same port and readiness helpers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = 16  # an allocation's header: the previous allocation and its slab
SLAB_HEADER = 32  # a slab's header, before its capacity


def allocator_points(binary):
    """The slab allocator's entry (symbol, slab capacity) and the instruction of
    `swift_task_dealloc` that loads the allocator's last allocation (offset, register)."""
    symbols = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    match = re.search(r"^\S+ \S (_ZN5swift14StackAllocatorILm(\d+)E\S*5allocEm)$", symbols, re.M)
    if not match:
        raise SystemExit(f"{binary} has no StackAllocator<…>::alloc symbol (stripped, or another runtime)")
    listing = subprocess.run(["gdb", "-nx", "-q", "-batch", "-ex", "disassemble swift_task_dealloc", binary],
                             capture_output=True, text=True).stdout
    # Both paths (the current task's allocator, the global fallback) join at the load of the
    # allocator's `lastAllocation`: `mov (%reg),%…`.
    load = re.search(r"<\+(\d+)>:\s+mov\s+\(%(r\w\w)\),%r\w\w", listing)
    if not load:
        raise SystemExit("swift_task_dealloc does not load the allocator as expected; this script needs updating")
    return match.group(1), int(match.group(2)), int(load.group(1)), load.group(2)


def trace(binary, arguments, environment, port, path):
    """The gdb events while one request is answered on a fresh connection: ('A', task, size,
    caller) and ('D', task)."""
    alloc, capacity, dealloc_offset, register = allocator_points(binary)
    server = subprocess.Popen([binary] + arguments, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(port, "/healthz")
        commands = f"""set pagination off
set confirm off
set debuginfod enabled off
break *'{alloc}'
commands
silent
printf "A %lu %p ", $rsi, $rdi
info symbol *(void**)$rsp
continue
end
break *((char*)swift_task_dealloc+{dealloc_offset})
commands
silent
printf "D %p\\n", ${register}
continue
end
printf "TRACING\\n"
continue
detach
quit
"""
        with tempfile.NamedTemporaryFile("w", suffix=".gdb") as script, tempfile.TemporaryFile("w+") as output:
            script.write(commands)
            script.flush()
            gdb = subprocess.Popen(["gdb", "-nx", "-q", "-batch", "-p", str(server.pid), "-x", script.name],
                                   stdout=output, stderr=subprocess.STDOUT)
            deadline = time.time() + 120
            while True:
                output.seek(0)
                if "TRACING" in output.read():
                    break
                if time.time() > deadline or gdb.poll() is not None:
                    gdb.kill()
                    raise SystemExit("gdb did not attach (is it installed, and may this user ptrace?)")
                time.sleep(0.2)
            time.sleep(1)
            with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
                connection.sendall(f"GET {path} HTTP/1.1\r\nHost: slabs\r\n\r\n".encode())
                answer = connection.recv(65536)
                time.sleep(1)  # the connection's task goes back to waiting for the next request
                gdb.send_signal(signal.SIGINT)
                gdb.wait(timeout=60)
            output.seek(0)
            lines = output.read().splitlines()
        if not answer.startswith(b"HTTP/1.1"):
            raise SystemExit(f"{path} was not answered while traced")
        events = []
        for line in lines:
            fields = line.split(None, 3)
            if line.startswith("A ") and len(fields) >= 3:
                caller = re.sub(r" in section .*", "", fields[3]) if len(fields) > 3 else "?"
                events.append(("A", fields[2], int(fields[1]), caller))
            elif line.startswith("D ") and len(fields) >= 2:
                events.append(("D", fields[1]))
        return events, capacity
    finally:
        server.terminate()
        server.wait(timeout=30)


def replay(events, capacity):
    """The slabs the allocator keeps for these events (a list of [capacity, used]) and the
    allocations live at the deepest point (slab index, size, caller)."""
    slabs, live, deepest = [], [], []
    for event in events:
        if event[0] == "D":
            index, offset, _, _ = live.pop()
            slabs[index][1] = offset
            continue
        _, _, size, caller = event
        need = ((size + 15) & ~15) + HEADER
        current = live[-1][0] if live else -1
        if current >= 0 and slabs[current][1] + need <= slabs[current][0]:
            index = current
        elif current + 1 < len(slabs) and slabs[current + 1][0] >= need:
            index = current + 1
        else:  # the runtime frees the empty slabs after the current one and takes one that fits
            kept = sum(slab[0] for slab in slabs[current + 1:])
            del slabs[current + 1:]
            slabs.append([max(capacity, need, kept), 0])
            index = len(slabs) - 1
        live.append((index, slabs[index][1], size, caller))
        slabs[index][1] += need
        # The deepest point: the furthest slab in use, then the most allocations live.
        if (index, len(live)) > (deepest[-1][0] if deepest else -1, len(deepest)):
            deepest = [(index, size, caller) for index, _, size, caller in live]
    return slabs, deepest


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--floor", action="store_true", help="trace the bare Hummingbird route instead of the gateway")
    parser.add_argument("--path", default="/healthz", help="the request to answer (GET; default /healthz)")
    parser.add_argument("--frames", action="store_true", help="list the frames each slab held at the deepest point")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    arguments = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        if arguments.floor:
            binary, command, environment = os.path.join(arguments.bin, "gatehouse-bench-floor"), [str(port)], dict(os.environ)
        else:
            binary, command = os.path.join(arguments.bin, "gatehouse"), ["serve"]
            environment = dict(
                os.environ, GATEHOUSE_DEVELOPMENT="true", GATEHOUSE_PORT=str(port), GATEHOUSE_PUBLIC_URL=f"http://127.0.0.1:{port}",
                GATEHOUSE_DATA_DIR=folder, GATEHOUSE_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode(),
                GATEHOUSE_LOG_LEVEL="error")
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: build the release executables first (Tests/Benchmarks/run builds them)")
        events, capacity = trace(binary, command, environment, port, arguments.path)
    # The connection's task: the one that ran Hummingbird's HTTP channel handler.
    served = collections.Counter(event[1] for event in events if event[0] == "A" and "HTTPChannelHandler" in event[3])
    if not served:
        raise SystemExit("no allocation of Hummingbird's connection handler was traced")
    task = served.most_common(1)[0][0]
    slabs, deepest = replay([event for event in events if event[1] == task], capacity)
    print(f"{'the bare route' if arguments.floor else 'the gateway'}, GET {arguments.path} on a fresh connection: "
          f"{len(slabs)} slabs, {sum(size + SLAB_HEADER for size, _ in slabs):,} bytes")
    names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(caller for _, _, caller in deepest),
                           capture_output=True, text=True).stdout.splitlines() if arguments.frames else []
    for index, (size, _) in enumerate(slabs):
        held = [(frame, name) for (slab, frame, _), name in zip(deepest, names or [""] * len(deepest)) if slab == index]
        used = sum(((frame + 15) & ~15) + HEADER for frame, _ in held)
        print(f"  slab {index + 1}: {size + SLAB_HEADER} bytes, {used} of {size} in use at the deepest point")
        for frame, name in held if arguments.frames else []:
            caller = re.sub(r" \+ [0-9]+$", "", name)
            print(f"      {frame:5d}  allocated by {caller[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
