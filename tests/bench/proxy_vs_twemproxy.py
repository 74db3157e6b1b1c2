#!/usr/bin/env python3
"""Terrace proxy vs twemproxy (nutcracker), in front of the same two Terrace engines, in one run.

Two `terrace engine --threads 1` run pinned to core 0. In front of them, both at once: our
`terrace proxy --threads 1` and Debian's nutcracker (ketama distribution, one server
connection per engine, as its defaults), each pinned to core 1; only the one being measured
is busy. redis-benchmark runs pinned to core 0 beside the engines. Rows alternate between the
proxies and the order flips every round; each cell is a median over the rounds. A
direct-to-engine row (one engine, no proxy) is printed for reference.

Beside throughput and p50 latency, each row records the proxy's own CPU time per request
(user + system from /proc): on a shared machine it is steadier than req/s.

Memcached text protocol: memcslap (libmemcached-tools, 50 threads) against our proxy's
Memcached port (in front of the same engines) and against a second nutcracker pool in
Memcached mode, which needs Memcached servers behind it: two memcached 1.6 (core 0). So these
rows compare the whole path (proxy + backend), not the proxy alone; direct memcached is the
reference.

Usage: tests/bench/proxy_vs_twemproxy.py [--terrace target/release/terrace] [--rounds 3] [--quick]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import cli, cpu_seconds, free_port, require_tools, wait_port  # noqa: E402

TESTS = ["set", "get"]


def bench(port, test, pipeline, n, size, auth=None, extra=()):
    """redis-benchmark on core 0: (req/s, p50 ms); `auth` is (user, password) to AUTH with,
    `extra` more options (`--tls --cacert ca.crt`)."""
    cmd = ["taskset", "-c", "0", "redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-d", str(size), "-c", "50",
           "-r", "100000", "-n", str(n), "-P", str(pipeline), "--csv", "-q", *extra]
    if auth:
        cmd += ["--user", auth[0], "-a", auth[1]]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 4 and cells[0] != "test":
            return float(cells[1]), float(cells[4])
    raise RuntimeError(f"no result from {' '.join(cmd)}: {out}")


def memcslap(port, test, n):
    threads = 50
    cmd = ["taskset", "-c", "0", "memcslap", f"--servers=127.0.0.1:{port}", f"--concurrency={threads}",
           f"--execute-number={n // threads}", f"--test={test}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(rf"Time to {test}\s+(\d+) keys by\s+\d+ threads:\s+([\d.]+) seconds", out)
    if not m:
        raise RuntimeError(f"no result from {' '.join(cmd)}: {out}")
    return int(m.group(1)) / float(m.group(2))


def start_engines(terrace, tmp, procs, count=2, core="0"):
    """`count` engines `--threads 1` pinned to `core`, each with a data directory in `tmp`
    (added to `procs`); their ports, once they accept."""
    ports = [free_port() for _ in range(count)]
    for i, p in enumerate(ports):
        d = os.path.join(tmp, f"engine-{i}")
        os.makedirs(d)
        procs.append(subprocess.Popen(["taskset", "-c", core, terrace, "engine", "--port", str(p), "--threads", "1", "--data-dir", d],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for p in ports:
        wait_port(p)
    return ports


def stop(procs, tmp):
    """Ends what a run started and removes its directory."""
    for p in procs:
        p.terminate()
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def nutcracker_config(path, pools):
    with open(path, "w") as f:
        for name, port, backends, redis in pools:
            servers = "\n".join(f"    - 127.0.0.1:{p}:1" for p in backends)
            f.write(f"""{name}:
  listen: 127.0.0.1:{port}
  hash: fnv1a_64
  distribution: ketama
  redis: {"true" if redis else "false"}
  auto_eject_hosts: false
  server_connections: 1
  timeout: 2000
  servers:
{servers}
""")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer requests per row (smoke run)")
    ap.add_argument("--size", type=int, default=128, help="value size (-d)")
    ap.add_argument("--pipelines", default="16,1", help="pipeline depths (-P)")
    args = ap.parse_args()
    require_tools(["nutcracker", "redis-benchmark", "redis-cli", "taskset", "memcached", "memcslap"], "nutcracker redis-tools util-linux")

    tmp = tempfile.mkdtemp(prefix="terrace-proxy-bench-")
    procs = []
    try:
        eports = start_engines(args.terrace, tmp, procs)
        mports = [free_port(), free_port()]
        for p in mports:
            procs.append(subprocess.Popen(["taskset", "-c", "0", "memcached", "-p", str(p), "-U", "0", "-l", "127.0.0.1",
                                           "-u", "root", "-t", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in mports:
            wait_port(p)
        tport, nport, tmc, nmc = free_port(), free_port(), free_port(), free_port()
        engines = ",".join(f"127.0.0.1:{p}" for p in eports)
        terrace = subprocess.Popen(["taskset", "-c", "1", args.terrace, "proxy", "--port", str(tport), "--memcache-port", str(tmc),
                                    "--threads", "1", "--engines", engines], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        conf = os.path.join(tmp, "nutcracker.yml")
        nutcracker_config(conf, [("redis", nport, eports, True), ("memcache", nmc, mports, False)])
        twem = subprocess.Popen(["taskset", "-c", "1", "nutcracker", "-c", conf, "-o", os.path.join(tmp, "nutcracker.log")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs += [terrace, twem]
        for p in [tport, nport, tmc, nmc]:
            wait_port(p)
        vout = subprocess.run(["nutcracker", "--version"], capture_output=True, text=True)
        version = (vout.stdout + vout.stderr).strip().splitlines()[0].replace("This is ", "")
        print(f"terrace proxy vs {version} (ketama), both --threads 1 pinned to core 1, in front of the same two "
              f"terrace engines (core 0); redis-benchmark on core 0; -c 50 -r 100000 -d {args.size}; "
              f"{args.rounds} rounds, medians")
        targets = [("twemproxy", nport, twem), ("terrace", tport, terrace), ("direct", eports[0], None)]
        pipelines = [int(x) for x in args.pipelines.split(",")]
        results = {}
        for rnd in range(args.rounds):
            order = targets[:2] if rnd % 2 == 0 else list(reversed(targets[:2]))
            order.append(targets[2])
            for pipeline in pipelines:
                n = (1_000_000 if pipeline > 1 else 200_000) // (10 if args.quick else 1)
                for test in TESTS:
                    for name, port, proc in order:
                        cpu0 = cpu_seconds(proc.pid) if proc else 0
                        rps, p50 = bench(port, test, pipeline, n, args.size)
                        cpu_us = (cpu_seconds(proc.pid) - cpu0) * 1e6 / n if proc else float("nan")
                        results.setdefault((test, pipeline, name), []).append((rps, p50, cpu_us))
            mc_targets = [("twemproxy", nmc, twem), ("terrace", tmc, terrace)]
            if rnd % 2:
                mc_targets.reverse()
            mc_targets.append(("direct", mports[0], None))
            n = 200_000 // (10 if args.quick else 1)
            for test in ["set", "get"]:
                for name, port, proc in mc_targets:
                    cpu0 = cpu_seconds(proc.pid) if proc else 0
                    rps = memcslap(port, test, n)
                    cpu_us = (cpu_seconds(proc.pid) - cpu0) * 1e6 / (n * (2 if test == "get" else 1)) if proc else float("nan")
                    results.setdefault((f"mc-{test}", "-", name), []).append((rps, float("nan"), cpu_us))
            for p in eports:
                cli(p, "FLUSHALL")
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)

        def med(key, i):
            return statistics.median(r[i] for r in results[key])

        print()
        print("| test | -P | twemproxy req/s | terrace req/s | terrace/twemproxy | twemproxy p50 ms | terrace p50 ms "
              "| twemproxy CPU µs/req | terrace CPU µs/req | direct req/s | direct p50 ms |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        ratios = []
        for pipeline in pipelines:
            for test in TESTS:
                tw, te, di = (test, pipeline, "twemproxy"), (test, pipeline, "terrace"), (test, pipeline, "direct")
                ratio = med(te, 0) / med(tw, 0)
                ratios.append(ratio)
                print(f"| {test.upper()} | {pipeline} | {med(tw, 0):,.0f} | {med(te, 0):,.0f} | {ratio:.2f} | {med(tw, 1):.3f} | "
                      f"{med(te, 1):.3f} | {med(tw, 2):.2f} | {med(te, 2):.2f} | {med(di, 0):,.0f} | {med(di, 1):.3f} |")
        print(f"\nthroughput terrace/twemproxy: median {statistics.median(ratios):.2f}, lowest {min(ratios):.2f}")
        print()
        print("Memcached text (memcslap, 50 threads): terrace proxy → terrace engines; twemproxy → memcached ×2; "
              "direct = one memcached. CPU is the proxy's per operation (a get run also loads its keys).")
        print("| test | twemproxy ops/s | terrace ops/s | terrace/twemproxy | twemproxy CPU µs/op | terrace CPU µs/op | direct memcached ops/s |")
        print("|---|---|---|---|---|---|---|")
        for test in ["set", "get"]:
            tw, te, di = (f"mc-{test}", "-", "twemproxy"), (f"mc-{test}", "-", "terrace"), (f"mc-{test}", "-", "direct")
            print(f"| {test} | {med(tw, 0):,.0f} | {med(te, 0):,.0f} | {med(te, 0) / med(tw, 0):.2f} | {med(tw, 2):.2f} | "
                  f"{med(te, 2):.2f} | {med(di, 0):,.0f} |")
    finally:
        stop(procs, tmp)


if __name__ == "__main__":
    main()
