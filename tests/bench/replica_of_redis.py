#!/usr/bin/env python3
"""A Terrace engine and a redis-server as replicas of the same redis-server master, side by
side: how long the full sync of 1,000,000 keys x 100 bytes takes (REPLICAOF until
`master_link_status:up`), the replica's memory after it (RSS growth per key it holds, 2 s
later), and how fast
each applies the master's command stream (after 1,000,000 pipelined SETs on the master, the
time until the replica's offset reaches the master's).

The master (Redis 7's diskless sync, without its 5 s wait) is pinned to core 0 with the
load generator; each replica starts afresh per run, pinned to core 1 (terrace
`--threads 1`). Replicas alternate within a round and the order flips every round; the
table gives medians over rounds.

Usage: tests/bench/replica_of_redis.py [--terrace target/release/terrace] [--rounds 3]
       [--keys 1000000]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import cli, free_port, require_tools, rss, wait_port  # noqa: E402


def replication_field(port, name):
    for line in cli(port, "INFO", "replication").splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise KeyError(name)


def start_server(kind, terrace, tmp, core, redis_args=()):
    """`terrace engine --threads 1` or redis-server (without persistence) on a free port,
    pinned to `core`: (port, process)."""
    port = free_port()
    data = os.path.join(tmp, f"{kind}-{port}")
    os.makedirs(data)
    if kind == "terrace":
        cmd = [terrace, "engine", "--port", str(port), "--threads", "1", "--data-dir", data]
    else:
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", data, *redis_args]
    p = subprocess.Popen(["taskset", "-c", str(core)] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return port, p


def start_replica(kind, terrace, tmp):
    return start_server(kind, terrace, tmp, 1)


def wait_until(check, timeout=300.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.01)


def run_one(kind, terrace, tmp, master, keys):
    """(sync seconds, bytes per key after the sync, stream catch-up seconds)."""
    port, p = start_replica(kind, terrace, tmp)
    try:
        before = rss(p.pid)
        started = time.monotonic()
        cli(port, "REPLICAOF", "127.0.0.1", str(master))
        wait_until(lambda: replication_field(port, "master_link_status") == "up")
        sync = time.monotonic() - started
        # What the sync's buffers held is given back to the system (terrace: within a second).
        time.sleep(2)
        # (Per key the replica holds: the SETs of earlier runs add keys to the master.)
        per_key = (rss(p.pid) - before) / int(cli(port, "DBSIZE"))
        subprocess.run(["taskset", "-c", "0", "redis-benchmark", "-p", str(master), "-t", "set", "-d", "100", "-c", "50",
                        "-r", str(keys), "-n", "1000000", "-P", "16", "-q"], capture_output=True, check=True)
        done = time.monotonic()
        target = int(replication_field(master, "master_repl_offset"))
        wait_until(lambda: int(replication_field(port, "slave_repl_offset")) >= target)
        return sync, per_key, time.monotonic() - done
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1_000_000)
    args = ap.parse_args()
    require_tools(["redis-server", "redis-cli", "redis-benchmark", "taskset"], "redis-server redis-tools util-linux")
    tmp = tempfile.mkdtemp(prefix="terrace-replica-bench-")
    master = free_port()
    mp = subprocess.Popen(["taskset", "-c", "0", "redis-server", "--port", str(master), "--save", "", "--appendonly", "no",
                           "--dir", tmp, "--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(master)
        cli(master, "DEBUG", "POPULATE", str(args.keys), "key", "100")
        print(f"master: redis-server with {args.keys:,} keys x 100 B on core 0 (the SETs of each run add keys); "
              f"replicas on core 1; {args.rounds} rounds; medians")
        results = {"terrace": [], "redis": []}
        for r in range(args.rounds):
            order = ["terrace", "redis"] if r % 2 == 0 else ["redis", "terrace"]
            for kind in order:
                results[kind].append(run_one(kind, args.terrace, tmp, master, args.keys))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        print()
        print("| replica | full sync s | bytes/key after sync | stream catch-up s after 1M SETs |")
        print("|---|---|---|---|")
        med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in results.items()}
        for kind in ["terrace", "redis"]:
            s, b, c = med[kind]
            print(f"| {kind} | {s:.2f} | {b:.0f} | {c:.2f} |")
        print(f"\nterrace / redis: full sync {med['terrace'][0] / med['redis'][0]:.2f}x the time, "
              f"{med['terrace'][1] / med['redis'][1]:.2f}x the memory")
    finally:
        mp.terminate()
        mp.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
