#!/usr/bin/env python3
"""Two builds of `terrace proxy`, A/B, in front of the same two engines, in one run: what a
change to the proxy costs per request.

Two `terrace engine --threads 1` (from the --after build) run pinned to core 0. In front of
them, both at once: the --before proxy and the --after proxy, each `--threads 1` pinned to
core 1; only the one being measured is busy. Both serve a tenant (`AUTH bench benchpw`, as a
client of a shared appliance would) or, with --default, the default tenant. redis-benchmark
runs pinned to core 0 beside the engines. Rows alternate between the builds and the order
flips every round; each cell is a median over the rounds, with the proxy's own CPU time per
request (user + system from /proc), steadier than req/s on a shared machine.

Usage: tests/bench/proxy_ab.py --before OLD/terrace --after target/release/terrace [--rounds 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import cpu_seconds, free_port, require_tools, wait_port  # noqa: E402
from proxy_vs_twemproxy import bench, start_engines, stop  # noqa: E402

TESTS = ["set", "get"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="the terrace binary before the change")
    ap.add_argument("--after", default="target/release/terrace", help="the terrace binary after it (its engines serve both)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=128, help="value size (-d)")
    ap.add_argument("--pipelines", default="16,1", help="pipeline depths (-P)")
    ap.add_argument("--default", action="store_true", help="as the default tenant instead of tenant 'bench'")
    args = ap.parse_args()
    require_tools(["redis-benchmark", "taskset"], "redis-tools util-linux")
    tmp = tempfile.mkdtemp(prefix="terrace-proxy-ab-")
    procs = []
    try:
        eports = start_engines(args.after, tmp, procs)
        conf = os.path.join(tmp, "terrace.toml")
        with open(conf, "w") as f:
            f.write("[proxy]\n[[proxy.tenants]]\nname = \"bench\"\npassword = \"benchpw\"\n")
        engines = ",".join(f"127.0.0.1:{p}" for p in eports)
        builds = []
        for name, binary in [("before", args.before), ("after", args.after)]:
            port, mc = free_port(), free_port()
            proc = subprocess.Popen(["taskset", "-c", "1", binary, "proxy", "--port", str(port), "--memcache-port", str(mc), "--threads", "1",
                                     "--engines", engines, "--config", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(proc)
            wait_port(port)
            builds.append((name, port, proc))
        auth = None if args.default else ("bench", "benchpw")
        print(f"terrace proxy A/B: {args.before} vs {args.after}, each --threads 1 pinned to core 1, in front of the same two "
              f"engines (core 0); redis-benchmark on core 0; -c 50 -r 100000 -d {args.size}; "
              f"as {'the default tenant' if args.default else 'tenant bench (AUTH)'}; {args.rounds} rounds, medians")
        pipelines = [int(x) for x in args.pipelines.split(",")]
        results = {}
        for rnd in range(args.rounds):
            order = builds if rnd % 2 == 0 else list(reversed(builds))
            for pipeline in pipelines:
                n = 1_000_000 if pipeline > 1 else 200_000
                for test in TESTS:
                    for name, port, proc in order:
                        cpu0 = cpu_seconds(proc.pid)
                        rps, p50 = bench(port, test, pipeline, n, args.size, auth)
                        cpu_us = (cpu_seconds(proc.pid) - cpu0) * 1e6 / n
                        results.setdefault((test, pipeline, name), []).append((rps, p50, cpu_us))
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)

        def med(key, i):
            return statistics.median(r[i] for r in results[key])

        print()
        print("| test | -P | before req/s | after req/s | after/before | before p50 ms | after p50 ms | before CPU µs/req | after CPU µs/req |")
        print("|---|---|---|---|---|---|---|---|---|")
        ratios = []
        for pipeline in pipelines:
            for test in TESTS:
                b, a = (test, pipeline, "before"), (test, pipeline, "after")
                ratio = med(a, 0) / med(b, 0)
                ratios.append(ratio)
                print(f"| {test.upper()} | {pipeline} | {med(b, 0):,.0f} | {med(a, 0):,.0f} | {ratio:.2f} | {med(b, 1):.3f} | "
                      f"{med(a, 1):.3f} | {med(b, 2):.2f} | {med(a, 2):.2f} |")
        print(f"\nthroughput after/before: median {statistics.median(ratios):.2f}, lowest {min(ratios):.2f}")
    finally:
        stop(procs, tmp)


if __name__ == "__main__":
    main()
