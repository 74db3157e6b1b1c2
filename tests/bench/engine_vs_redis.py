#!/usr/bin/env python3
"""Terrace engine vs redis-server, side by side in one run.

Both servers run at once, each pinned to core 0 with taskset (only the one being measured is
busy); redis-benchmark runs pinned to core 1. Rows alternate between the servers, and the order
flips every round. Prints the median requests/s of each server per row and the ratio.

Beside throughput, each row records the server's own CPU time per request (user + system, from
/proc/PID/stat around the run): on a shared machine that number is much steadier than req/s,
which also moves with how the two processes are scheduled. The last columns say how busy
redis-benchmark itself was (its CPU time over the run's wall time, from getrusage): a row
where the client is near 100% in both servers' runs measures the client's core, not the
servers, and its req/s ratio is the client's noise; the CPU per request still compares them.
The engine's CPU includes idle spinning (`idle_spin_us`: polling for the next request instead
of sleeping); the "terrace spin" column says how much of it that was (INFO threads spin_ms).
"rounds ahead" counts the rounds in which terrace's run beat the redis run next to it in time.

Unpipelined rows send 1,000,000 requests (~11 s per run), pipelined rows 2,000,000: at 300,000
unpipelined requests (~3 s) single runs of either server moved by up to ±10% on this shared
machine, which was more than the difference being measured.

Then memory: 1,000,000 SETs of 100-byte values under 16-byte keys, loaded with redis-cli --pipe;
bytes per key from INFO used_memory and from the process RSS.

Usage: tests/bench/engine_vs_redis.py [--terrace target/release/terrace] [--rounds 3] [--quick]
       [--memory-only | --skip-memory] [--tests set,get,...] [--sizes 128,1024] [--pipelines 16,1]
"""

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TESTS = ["set", "get", "incr", "lpush", "sadd", "zadd", "hset"]


def wait_port(port, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on port {port} did not start")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, check=True).stdout


def info_field(port, section, name):
    for line in cli(port, "INFO", section).splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    raise KeyError(name)


def rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench(port, test, size, pipeline, n):
    """Requests/s, and the share of the run's wall time redis-benchmark spent on CPU."""
    cmd = ["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-t", test, "-d", str(size), "-c", "50",
           "-r", "1000000", "-n", str(n), "-P", str(pipeline), "--csv", "-q"]
    cpu0, wall0 = children_cpu(), time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    busy = (children_cpu() - cpu0) / (time.monotonic() - wall0)
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[0] != "test":
            return float(cells[1]), busy
    raise RuntimeError(f"no result from {' '.join(cmd)}: {out}")


def cpu_times(pid):
    """(user, system) CPU seconds of process `pid` so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def spin_seconds(port):
    """The engine's reactors' idle spinning so far (INFO threads spin_ms); 0 for redis."""
    text = cli(port, "INFO", "threads")
    return sum(int(part.split("=")[1]) for part in text.replace("\r", "").replace("\n", ",").split(",")
               if part.startswith("spin_ms=")) / 1000


def cpu_seconds(pid):
    return sum(cpu_times(pid))


def load_memory_dataset(port, path):
    with open(path, "rb") as f:
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=f, capture_output=True, check=True)


def write_dataset(path, keys):
    value = b"v" * 100
    with open(path, "wb") as f:
        for i in range(keys):
            key = b"key:%012d" % i  # 16 bytes
            f.write(b"*3\r\n$3\r\nSET\r\n$16\r\n" + key + b"\r\n$100\r\n" + value + b"\r\n")


def require_tools(tools, packages):
    """Stops with the Debian packages to install if one of `tools` is not on the PATH."""
    for tool in tools:
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found (apt-get install {packages})")


def start_pinned_pair(terrace_binary, data_dir):
    """redis-server and `terrace engine --threads 1`, both pinned to core 0, on free ports:
    [(name, port, process)] (not yet waited for)."""
    require_tools(["redis-server", "redis-benchmark", "redis-cli", "taskset"], "redis-server redis-tools util-linux")
    rport, tport = free_port(), free_port()
    redis = subprocess.Popen(["taskset", "-c", "0", "redis-server", "--port", str(rport), "--save", "", "--appendonly", "no",
                              "--dir", data_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    terrace = subprocess.Popen(["taskset", "-c", "0", terrace_binary, "engine", "--port", str(tport), "--threads", "1",
                                "--data-dir", data_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [("redis", rport, redis), ("terrace", tport, terrace)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer requests per row (smoke run)")
    ap.add_argument("--memory-only", action="store_true", help="only the 1,000,000-key memory measurement")
    ap.add_argument("--skip-memory", action="store_true", help="skip the memory measurement")
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated subset of " + ",".join(TESTS))
    ap.add_argument("--sizes", default="128,1024", help="value sizes (-d)")
    ap.add_argument("--pipelines", default="16,1", help="pipeline depths (-P)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="terrace-bench-")
    servers = start_pinned_pair(args.terrace, tmp)
    try:
        for _, port, _ in servers:
            wait_port(port)
        version = cli(servers[0][1], "INFO", "server").split("redis_version:")[1].split()[0]
        print(f"redis-server {version} vs terrace engine --threads 1; both pinned to core 0, "
              f"redis-benchmark pinned to core 1; -c 50 -r 1000000; {args.rounds} rounds, medians")
        tests = args.tests.split(",")
        sizes = [int(x) for x in args.sizes.split(",")]
        pipelines = [int(x) for x in args.pipelines.split(",")]
        if not args.skip_memory:
            measure_memory(servers, tmp)
        if args.memory_only:
            return
        print()
        run_throughput(servers, args, tests, sizes, pipelines)
    finally:
        for _, _, proc in servers:
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def measure_memory(servers, tmp):
    print("memory (fresh servers):  1,000,000 SETs, 16-byte keys, 100-byte values")
    print("| server | used_memory bytes/key | RSS bytes/key (growth) | RSS bytes/key (total) |")
    print("|---|---|---|---|")
    dataset = os.path.join(tmp, "dataset.resp")
    write_dataset(dataset, 1_000_000)
    for name, port, proc in servers:
        used0, rss0 = info_field(port, "memory", "used_memory"), rss(proc.pid)
        load_memory_dataset(port, dataset)
        keys = int(cli(port, "DBSIZE").strip())
        assert keys == 1_000_000, f"{name} holds {keys} keys"
        used1, rss1 = info_field(port, "memory", "used_memory"), rss(proc.pid)
        print(f"| {name} | {(used1 - used0) / keys:.1f} | {(rss1 - rss0) / keys:.1f} | {rss1 / keys:.1f} |")
    for _, port, _ in servers:
        cli(port, "FLUSHALL")


def run_throughput(servers, args, tests, sizes, pipelines):
    results = {}
    for rnd in range(args.rounds):
        order = servers if rnd % 2 == 0 else list(reversed(servers))
        for pipeline in pipelines:
            n = (2_000_000 if pipeline > 1 else 1_000_000) // (10 if args.quick else 1)
            for size in sizes:
                for test in tests:
                    for name, port, proc in order:
                        cpu0, spin0 = cpu_seconds(proc.pid), spin_seconds(port)
                        rps, client_busy = bench(port, test, size, pipeline, n)
                        cpu_us = (cpu_seconds(proc.pid) - cpu0) * 1e6 / n
                        results.setdefault((test, size, pipeline, name, "spin"), []).append((spin_seconds(port) - spin0) * 1e6 / n)
                        results.setdefault((test, size, pipeline, name), []).append(rps)
                        results.setdefault((test, size, pipeline, name, "client"), []).append(client_busy)
                        results.setdefault((test, size, pipeline, name, "cpu"), []).append(cpu_us)
                        cli(port, "FLUSHALL")
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)

    print()
    print("| test | -d | -P | redis req/s | terrace req/s | terrace/redis | rounds ahead | redis CPU µs/req | terrace CPU µs/req "
          "| terrace spin µs/req | CPU redis/terrace | client busy (redis run) | client busy (terrace run) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, cpu_ratios, client_bound = [], [], 0
    for pipeline in pipelines:
        for size in sizes:
            for test in tests:
                r = statistics.median(results[(test, size, pipeline, "redis")])
                t = statistics.median(results[(test, size, pipeline, "terrace")])
                ahead = sum(tr > rr for tr, rr in zip(results[(test, size, pipeline, "terrace")],
                                                      results[(test, size, pipeline, "redis")]))
                rc = statistics.median(results[(test, size, pipeline, "redis", "cpu")])
                tc = statistics.median(results[(test, size, pipeline, "terrace", "cpu")])
                ts = statistics.median(results[(test, size, pipeline, "terrace", "spin")])
                ratios.append(t / r)
                cpu_ratios.append(rc / tc if tc else float("nan"))
                rb = statistics.median(results[(test, size, pipeline, "redis", "client")])
                tb = statistics.median(results[(test, size, pipeline, "terrace", "client")])
                client_bound += rb >= 0.95 and tb >= 0.95
                print(f"| {test.upper()} | {size} | {pipeline} | {r:,.0f} | {t:,.0f} | {t / r:.2f} | {ahead}/{args.rounds} "
                      f"| {rc:.2f} | {tc:.2f} | {ts:.2f} | {cpu_ratios[-1]:.2f} "
                      f"| {rb:.0%} | {tb:.0%} |")
    print(f"\nthroughput: median ratio {statistics.median(ratios):.2f}, lowest {min(ratios):.2f}")
    print(f"CPU per request (redis/terrace, > 1 means terrace is cheaper): median {statistics.median(cpu_ratios):.2f}, "
          f"lowest {min(cpu_ratios):.2f}")
    print(f"rows where redis-benchmark was >= 95% busy in both runs (client-bound): {client_bound} of {len(ratios)}")


if __name__ == "__main__":
    main()
