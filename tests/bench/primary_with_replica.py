#!/usr/bin/env python3
"""A Terrace engine and a redis-server as primaries with one replica of their own kind
attached, side by side: the full sync of 1,000,000 keys x 100 bytes from the primary
(REPLICAOF until `master_link_status:up`), then SET and GET throughput on the primary with the
replica attached (redis-benchmark, -P 16 and -P 1) and the replica's lag when a SET run ends
(the primary's offset minus the replica's, in bytes, and the time until it has caught up).

Primaries (terrace `--threads 1`) are pinned to core 0; the replica and redis-benchmark share
core 1, for both kinds alike. Kinds alternate within a round and the order flips every round;
the table gives medians over rounds.

Usage: tests/bench/primary_with_replica.py [--terrace target/release/terrace] [--rounds 3]
       [--keys 1000000] [--scale 1.0]
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
from engine_vs_redis import bench, cli, load_memory_dataset, require_tools, write_dataset  # noqa: E402
from replica_of_redis import replication_field, start_server, wait_until  # noqa: E402

RUNS = [("set", 16, 2_000_000), ("get", 16, 2_000_000), ("set", 1, 200_000), ("get", 1, 200_000)]


def start(kind, terrace, tmp, core):
    return start_server(kind, terrace, tmp, core, ["--repl-diskless-sync-delay", "0"])


def run_one(kind, terrace, tmp, dataset):
    """(full sync s, {run: req/s}, lag bytes after SET -P 16, catch-up s)."""
    primary, pp = start(kind, terrace, tmp, 0)
    replica, rp = start(kind, terrace, tmp, 1)
    try:
        load_memory_dataset(primary, dataset)
        started = time.monotonic()
        cli(replica, "REPLICAOF", "127.0.0.1", str(primary))
        wait_until(lambda: replication_field(replica, "master_link_status") == "up")
        sync = time.monotonic() - started
        rates, lag, catch_up = {}, None, None
        for test, pipeline, n in RUNS:
            rates[(test, pipeline)], _ = bench(primary, test, 100, pipeline, n)
            if (test, pipeline) == ("set", 16):
                target = int(replication_field(primary, "master_repl_offset"))
                lag = target - int(replication_field(replica, "slave_repl_offset"))
                done = time.monotonic()
                wait_until(lambda: int(replication_field(replica, "slave_repl_offset")) >= target)
                catch_up = time.monotonic() - done
        return sync, rates, lag, catch_up
    finally:
        for p in (rp, pp):
            p.terminate()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the requests of each run (a quick check)")
    args = ap.parse_args()
    global RUNS
    RUNS = [(t, p, max(1000, int(n * args.scale))) for t, p, n in RUNS]
    require_tools(["redis-server", "redis-cli", "redis-benchmark", "taskset"], "redis-server redis-tools util-linux")
    tmp = tempfile.mkdtemp(prefix="terrace-primary-bench-")
    try:
        dataset = os.path.join(tmp, "dataset.resp")
        write_dataset(dataset, args.keys)
        print(f"{args.keys:,} keys x 100 B loaded into each primary (core 0) before its replica (core 1, with the "
              f"load generator) syncs; {args.rounds} rounds; medians")
        results = {"terrace": [], "redis": []}
        for r in range(args.rounds):
            for kind in (["terrace", "redis"] if r % 2 == 0 else ["redis", "terrace"]):
                results[kind].append(run_one(kind, args.terrace, tmp, dataset))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        med = lambda kind, f: statistics.median(f(x) for x in results[kind])  # noqa: E731
        print()
        print("| measure | terrace | redis-server | terrace / redis |")
        print("|---|---|---|---|")
        t, rd = med("terrace", lambda x: x[0]), med("redis", lambda x: x[0])
        print(f"| full sync of {args.keys:,} keys, s | {t:.2f} | {rd:.2f} | {t / rd:.2f} |")
        for test, pipeline, _ in RUNS:
            t, rd = med("terrace", lambda x: x[1][(test, pipeline)]), med("redis", lambda x: x[1][(test, pipeline)])
            print(f"| {test.upper()} -P {pipeline} with a replica, req/s | {t:,.0f} | {rd:,.0f} | {t / rd:.2f} |")
        t, rd = med("terrace", lambda x: x[2]), med("redis", lambda x: x[2])
        print(f"| replica lag when SET -P 16 ends, bytes | {t:,.0f} | {rd:,.0f} | |")
        t, rd = med("terrace", lambda x: x[3]), med("redis", lambda x: x[3])
        print(f"| replica catch-up after it, s | {t:.3f} | {rd:.3f} | |")
        print()
        print("Each round (the spread behind the medians): terrace / redis-server")
        print()
        print("| round | full sync, s | " + " | ".join(f"{t.upper()} -P {p}, req/s" for t, p, _ in RUNS) + " |")
        print("|---" * (2 + len(RUNS)) + "|")
        for r, (te, re_) in enumerate(zip(results["terrace"], results["redis"])):
            cells = [f"{te[1][(t, p)]:,.0f} / {re_[1][(t, p)]:,.0f}" for t, p, _ in RUNS]
            print(f"| {r + 1} | {te[0]:.2f} / {re_[0]:.2f} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
