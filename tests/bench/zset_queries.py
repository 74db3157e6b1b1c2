#!/usr/bin/env python3
"""Queries on one large sorted set: terrace engine vs redis-server, side by side in one run.

The throughput rows of engine_vs_redis.py only ever ZADD; this measures what a leaderboard
asks of a big sorted set: ranks (ZREVRANK), a page from a score (ZRANGEBYSCORE … LIMIT 0 10),
a page at a deep index (ZRANGE 500000 500009), counts (ZCOUNT from a score to +inf) and
rescoring (ZADD of existing members). Redis answers the reads in O(log n) from its skiplist's
spans; so must we.

Both servers are loaded with the same set (--members, default 1,000,000: `element:<i>`, i
zero-padded to 12 digits as redis-benchmark writes __rand_int__, so 20-byte members, with
random integer scores, via redis-cli --pipe), each pinned to core 0 with taskset; the bytes
per member that cost are printed first (RSS read 2 s after the load, for both). redis-benchmark runs pinned to core 1 with `-c 50
-P 16 -r <members>`. Rows alternate between the servers and the order flips every round.
Prints median req/s and server CPU per request.

Usage: tests/bench/zset_queries.py [--terrace target/release/terrace] [--rounds 3]
       [--members 1000000] [--requests 200000]
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import (cli, cpu_seconds, info_field, load_memory_dataset, rss,  # noqa: E402
                             start_pinned_pair, wait_port)

QUERIES = [
    ("ZREVRANK", ["ZREVRANK", "lb", "element:__rand_int__"]),
    ("ZRANGEBYSCORE LIMIT 0 10", ["ZRANGEBYSCORE", "lb", "__rand_int__", "+inf", "LIMIT", "0", "10"]),
    ("ZRANGE 500000 500009", ["ZRANGE", "lb", "500000", "500009"]),
    ("ZCOUNT score +inf", ["ZCOUNT", "lb", "__rand_int__", "+inf"]),
    ("ZADD (rescore)", ["ZADD", "lb", "__rand_int__", "element:__rand_int__"]),
]


def write_leaderboard(path, members):
    """ZADD commands of 1,000 members each, scores random in [0, members)."""
    rng = random.Random(7)
    with open(path, "wb") as f:
        for base in range(0, members, 1000):
            batch = range(base, min(base + 1000, members))
            args = [b"ZADD", b"lb"]
            for i in batch:
                args += [b"%d" % rng.randrange(members), b"element:%012d" % i]
            f.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))


def run_query(port, command, members, requests):
    cmd = ["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-c", "50", "-P", "16", "-r", str(members),
           "-n", str(requests), "--csv", "-q", *command]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[0] != "test":
            return float(cells[1])
    raise RuntimeError(f"no result from {' '.join(cmd)}: {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--members", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=200_000)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="terrace-zbench-")
    servers = start_pinned_pair(args.terrace, tmp)
    try:
        dataset = os.path.join(tmp, "leaderboard.resp")
        write_leaderboard(dataset, args.members)
        memory = []
        for name, port, proc in servers:
            wait_port(port)
            used0, rss0 = info_field(port, "memory", "used_memory"), rss(proc.pid)
            load_memory_dataset(port, dataset)
            card = int(cli(port, "ZCARD", "lb").strip())
            assert card == args.members, f"{name} holds {card} members"
            time.sleep(2)  # both allocators hand back what the load freed (the engine: once a second)
            used1, rss1 = info_field(port, "memory", "used_memory"), rss(proc.pid)
            memory.append(f"| {name} | {(used1 - used0) / card:.1f} | {(rss1 - rss0) / card:.1f} |")
        print(f"one sorted set of {args.members:,} members; redis-server vs terrace engine --threads 1, both pinned to "
              f"core 0; redis-benchmark on core 1, -c 50 -P 16 -r {args.members} -n {args.requests}; "
              f"{args.rounds} rounds, medians")
        print("\n| server | used_memory bytes/member | RSS bytes/member (growth) |\n|---|---|---|")
        print("\n".join(memory))
        results = {}
        for rnd in range(args.rounds):
            order = servers if rnd % 2 == 0 else list(reversed(servers))
            for label, command in QUERIES:
                for name, port, proc in order:
                    cpu0 = cpu_seconds(proc.pid)
                    rps = run_query(port, command, args.members, args.requests)
                    cpu_us = (cpu_seconds(proc.pid) - cpu0) * 1e6 / args.requests
                    results.setdefault((label, name), []).append((rps, cpu_us))
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
        print()
        print("| query | redis req/s | terrace req/s | terrace/redis | redis CPU µs/req | terrace CPU µs/req |")
        print("|---|---|---|---|---|---|")
        for label, _ in QUERIES:
            r = statistics.median(x[0] for x in results[(label, "redis")])
            t = statistics.median(x[0] for x in results[(label, "terrace")])
            rc = statistics.median(x[1] for x in results[(label, "redis")])
            tc = statistics.median(x[1] for x in results[(label, "terrace")])
            print(f"| {label} | {r:,.0f} | {t:,.0f} | {t / r:.2f} | {rc:.2f} | {tc:.2f} |")
    finally:
        for _, _, proc in servers:
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
