#!/usr/bin/env python3
"""A/B of engine builds (and optionally redis-server) on one redis-benchmark row.

For comparing two builds of the engine, where engine_vs_redis.py compares the engine with
Redis: each round starts every server afresh, pinned to core 0, runs the row with
redis-benchmark pinned to core 1, and stops it; servers alternate within a round and the
order flips every round. Per run it prints req/s, the server's CPU per request (user + system,
and user alone, from /proc/PID/stat; and how much of it the engine spent idle spinning) and
how busy redis-benchmark was (its CPU over the run's wall time): near 100% means the row
measures the client's core, and only the CPU columns compare the servers.

A BIN may carry engine options after commas, to compare settings of one build:
`target/release/terrace,--prefetch-batch,0`; and commands run once the server is up, after
semicolons: `target/release/terrace;TERRACE.EPOCH range-0 1 LEASE 4102444800000` (a primary
holding a term lease, whose check every write pays).

Usage: tests/bench/engine_ab.py [--rounds 3] [--test get] [--size 128] [--pipeline 16]
       [--requests 2000000] [--preload] BIN [BIN ...]      (BIN "redis": redis-server)
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import bench, cli, cpu_times, free_port, spin_seconds, wait_port  # noqa: E402


def start(binary, port, data_dir):
    """A fresh server pinned to core 0, with nothing to load from `data_dir`."""
    if binary == "redis":
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", data_dir]
    else:
        binary, *setup = binary.split(";")
        path, *options = binary.split(",")
        cmd = [path, "engine", "--port", str(port), "--threads", "1", "--data-dir", data_dir, *options]
    proc = subprocess.Popen(["taskset", "-c", "0", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    cli(port, "PING")
    for command in [] if binary == "redis" else setup:
        cli(port, *command.split())
    return proc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--test", default="get")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--preload", action="store_true", help="fill 1,000,000 SETs first (GET then hits)")
    args = ap.parse_args()
    names = [b if b == "redis" else " ".join([os.path.basename(b.split(",")[0]), *b.split(",")[1:]]) for b in args.binaries]
    print(f"{args.test.upper()} -d {args.size} -P {args.pipeline} -c 50 -r 1000000 -n {args.requests}"
          f"{', preloaded' if args.preload else ''}; servers on core 0, redis-benchmark on core 1; {args.rounds} rounds")
    print("| round | server | req/s | CPU µs/req | user µs/req | spin µs/req | client busy |")
    print("|---|---|---|---|---|---|---|")
    results = {}
    for rnd in range(args.rounds):
        order = list(zip(names, args.binaries))
        if rnd % 2:
            order.reverse()
        for name, binary in order:
            port = free_port()
            with tempfile.TemporaryDirectory(prefix="terrace-ab-") as data_dir:
                proc = start(binary, port, data_dir)
                try:
                    if args.preload:
                        bench(port, "set", args.size, 16, 1_000_000)
                    u0, s0 = cpu_times(proc.pid)
                    spin0 = spin_seconds(port)
                    rps, busy = bench(port, args.test, args.size, args.pipeline, args.requests)
                    u1, s1 = cpu_times(proc.pid)
                    spin = (spin_seconds(port) - spin0) * 1e6 / args.requests
                finally:
                    proc.terminate()
                    proc.wait()
            cpu = (u1 - u0 + s1 - s0) * 1e6 / args.requests
            user = (u1 - u0) * 1e6 / args.requests
            results.setdefault(name, []).append((rps, cpu, user, spin))
            print(f"| {rnd + 1} | {name} | {rps:,.0f} | {cpu:.3f} | {user:.3f} | {spin:.3f} | {busy:.0%} |", flush=True)
    print("\nmedians:")
    print("| server | req/s | CPU µs/req | user µs/req | spin µs/req |")
    print("|---|---|---|---|---|")
    for name in names:
        rows = results[name]
        print(f"| {name} | {statistics.median(r[0] for r in rows):,.0f} | {statistics.median(r[1] for r in rows):.3f} "
              f"| {statistics.median(r[2] for r in rows):.3f} | {statistics.median(r[3] for r in rows):.3f} |")


if __name__ == "__main__":
    main()
