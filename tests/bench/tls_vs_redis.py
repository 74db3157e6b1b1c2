#!/usr/bin/env python3
"""What TLS costs, ours against Redis's, in one run: the proxy's Redis port plain and over TLS
(`--tls-port`, rustls) in front of two engines, an engine's own port plain and over TLS (its
`--tls-port`: TLS ended by a relay in front of the connection loop), and redis-server plain and
over TLS (`--tls-port`, OpenSSL), with certificates `terrace tls-gen` makes for the run.

Every server process — the proxy (`--threads 1`) and its engines, the engine served directly,
redis-server — is pinned to core 1 and redis-benchmark to core 0, so the client's own TLS work
(OpenSSL's, the same for all) never shares a core with a server. For each row (-P 16 and -P 1,
SET and GET, 128-byte values) the servers run in turn (the order flips every round); each cell
is a median over the rounds, with the server side's CPU per request (user + system from /proc:
for the proxy, the proxy's and its engines'). A server's TLS cost is the CPU it adds per
request and 1 - TLS req/s / plain req/s; the goal: ours no larger than Redis's.

`--engines-core 0` puts the proxy's engines on the client's core instead (the layout of the
first run, session 28: there the client's TLS work slowed the engines).

Usage: tests/bench/tls_vs_redis.py [--terrace target/release/terrace] [--rounds 3] [--engines-core 1]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--engines-core", default="1")
    args = ap.parse_args()
    require_tools(["redis-server", "redis-benchmark", "taskset"], "redis-server redis-tools util-linux")
    tmp = tempfile.mkdtemp(prefix="terrace-tls-bench-")
    procs = []
    try:
        certs = os.path.join(tmp, "certs")
        subprocess.run([args.terrace, "tls-gen", certs], check=True, stdout=subprocess.DEVNULL)
        cert, key, ca = (os.path.join(certs, f) for f in ("server.crt", "server.key", "ca.crt"))
        eports = start_engines(args.terrace, tmp, procs, core=args.engines_core)
        engines = procs[-2:]
        eport, etls = free_port(), free_port()
        direct = subprocess.Popen(["taskset", "-c", "1", args.terrace, "engine", "--threads", "1", "--port", str(eport), "--tls-port", str(etls),
                                   "--tls-cert-file", cert, "--tls-key-file", key, "--data-dir", os.path.join(tmp, "direct")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(direct)
        port, tls_port, mc = free_port(), free_port(), free_port()
        proxy = subprocess.Popen(["taskset", "-c", "1", args.terrace, "proxy", "--threads", "1", "--port", str(port), "--tls-port", str(tls_port),
                                  "--memcache-port", str(mc), "--tls-cert-file", cert, "--tls-key-file", key,
                                  "--engines", ",".join(f"127.0.0.1:{p}" for p in eports)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proxy)
        rport, rtls = free_port(), free_port()
        redis = subprocess.Popen(["taskset", "-c", "1", "redis-server", "--port", str(rport), "--tls-port", str(rtls), "--tls-cert-file", cert,
                                  "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", "--save", "",
                                  "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(redis)
        for p in (port, tls_port, eport, etls, rport, rtls):
            wait_port(p)
        proxy_side = [proxy, *engines]
        servers = [("terrace proxy", "plain", port, None, proxy_side), ("terrace proxy", "tls", tls_port, ca, proxy_side),
                   ("terrace engine", "plain", eport, None, [direct]), ("terrace engine", "tls", etls, ca, [direct]),
                   ("redis", "plain", rport, None, [redis]), ("redis", "tls", rtls, ca, [redis])]
        print(f"TLS cost: terrace proxy (rustls, --threads 1) in front of two engines (core {args.engines_core}), a terrace engine "
              f"(--threads 1) direct, redis-server (OpenSSL); servers on core 1, redis-benchmark on core 0; "
              f"-c 50 -r 100000 -d {args.size}; {args.rounds} rounds, medians")
        results = {}
        rows = [(16, "set"), (16, "get"), (1, "set"), (1, "get")]
        for rnd in range(args.rounds):
            order = servers if rnd % 2 == 0 else list(reversed(servers))
            for pipeline, test in rows:
                n = 1_000_000 if pipeline > 1 else 200_000
                for system, kind, p, cafile, side in order:
                    cpu0 = sum(cpu_seconds(s.pid) for s in side)
                    rps, p50 = bench(p, test, pipeline, n, args.size, extra=["--tls", "--cacert", cafile] if cafile else [])
                    cpu = sum(cpu_seconds(s.pid) for s in side) - cpu0
                    results.setdefault((system, kind, pipeline, test), []).append((rps, p50, cpu * 1e6 / n))
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)

        def med(key, i):
            return statistics.median(r[i] for r in results[key])

        print()
        print("| server | test | -P | plain req/s | TLS req/s | TLS/plain | plain p50 ms | TLS p50 ms | plain CPU µs/req | TLS CPU µs/req | TLS adds µs/req |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        systems = ("terrace proxy", "terrace engine", "redis")
        kept = {s: [] for s in systems}
        added = {s: [] for s in systems}
        for pipeline, test in rows:
            for system in systems:
                plain, tls = (system, "plain", pipeline, test), (system, "tls", pipeline, test)
                ratio = med(tls, 0) / med(plain, 0)
                kept[system].append(ratio)
                more = med(tls, 2) - med(plain, 2)
                added[system].append(more)
                print(f"| {system} | {test.upper()} | {pipeline} | {med(plain, 0):,.0f} | {med(tls, 0):,.0f} | {ratio:.2f} | {med(plain, 1):.3f} | "
                      f"{med(tls, 1):.3f} | {med(plain, 2):.2f} | {med(tls, 2):.2f} | {more:+.2f} |")
        print()
        for system in systems:
            print(f"{system}: TLS keeps {statistics.median(kept[system]):.2f} of the plain throughput (median of the rows; lowest "
                  f"{min(kept[system]):.2f}); adds {statistics.median(added[system]):.2f} µs of CPU per request (median; most {max(added[system]):.2f})")
    finally:
        stop(procs, tmp)


if __name__ == "__main__":
    main()
