#!/usr/bin/env python3
"""One tenant's long command against another tenant's latency (issue 47, finding 7): tenant B's
GET latency while tenant A runs one command whose work it chooses, over and over, one at a
time — a random count, KEYS over its keyspace, SORT of a long list, HRANDFIELD, a Lua loop —
on terrace (`--threads 1`: the tenants share a reactor) and on redis-server (A and B in
databases 1 and 2: what a shared Redis gives).

Each server is pinned to core 0, the clients to core 1; B's prober runs real-time
(SCHED_FIFO), as in tenant_fairness.py, whose helpers it uses. B sends a GET every
millisecond; its latency is send to reply. For each command the table gives A's command
time (median), B's p50, p99 and maximum beside it, and B's p99 alone. Servers alternate
within each round; medians over rounds.

Usage: tests/bench/long_commands.py [--terrace target/release/terrace] [--rounds 3]
       [--seconds 4] [--keys 200000]
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import require_tools, wait_port  # noqa: E402
from tenant_fairness import connect, encode, pct, populate_b, probe_b, send_all, start_servers, stop_servers  # noqa: E402

# Tenant A's commands, each sent again as soon as its reply is read.
LONG = [
    ("SRANDMEMBER s -1000000", ["SRANDMEMBER", "a:set", "-1000000"]),
    ("HRANDFIELD h -1000000 WITHVALUES", ["HRANDFIELD", "a:hash", "-1000000", "WITHVALUES"]),
    ("KEYS * (A's keys)", ["KEYS", "*"]),
    ("SORT list LIMIT 0 1 (the keys' count)", ["SORT", "a:list", "LIMIT", "0", "1"]),
    ("EVAL loop of 20M additions", ["EVAL", "local n = 0 for i = 1, 20000000 do n = n + i end return n", "0"]),
]


def populate(port, a_setup, b_setup, keys):
    cmds = [["SADD", "a:set", "x", "y", "z"], ["HSET", "a:hash", "f", "v", "g", "w"]]
    for start in range(0, keys, 1000):
        cmds.append(["MSET"] + [x for i in range(start, start + 1000) for x in (f"a:k{i}", "v")])
        cmds.append(["RPUSH", "a:list"] + [str((i * 7919) % 100003) for i in range(start, start + 1000)])
    send_all(port, a_setup, cmds)
    populate_b(port, b_setup)


def read_reply(sock):
    """Reads one whole reply, however long, in one pass (tenant_fairness's `replies` parses
    again from the start as each chunk arrives: quadratic on a reply of a million elements)."""
    buf = bytearray()
    pos = 0
    pending = 1  # values still to read, nested arrays' elements included
    while pending:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise SystemExit("server closed the connection")
            buf += chunk
            continue
        kind = buf[pos:pos + 1]
        if kind == b"$":
            n = int(buf[pos + 1:eol])
            end = eol + 2 + (n + 2 if n >= 0 else 0)
            while len(buf) < end:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise SystemExit("server closed the connection")
                buf += chunk
            pos = end
            pending -= 1
        elif kind in (b"*", b"%", b"~"):
            n = int(buf[pos + 1:eol])
            pos = eol + 2
            pending += max(n, 0) * (2 if kind == b"%" else 1) - 1
        elif kind == b"-":
            raise SystemExit(f"error reply: {bytes(buf[pos:eol])!r}")
        else:
            pos = eol + 2
            pending -= 1
        if pos > 1 << 20:
            del buf[:pos]
            pos = 0


def run_a(port, setup, command, stop_at, done):
    """Tenant A (a child process): `command` again and again until `stop_at`; puts each run's
    time in ms into `done`."""
    os.sched_setaffinity(0, {1})
    s = connect(port, setup)
    times = []
    while time.monotonic() < stop_at:
        started = time.perf_counter()
        s.sendall(encode(command))
        read_reply(s)
        times.append((time.perf_counter() - started) * 1e3)
    s.close()
    done.put(times)


def run_one(port, a_setup, b_setup, command, seconds):
    """B alone, then beside A's command: (B p99 alone, B p50, p99, max beside, A's ms)."""
    alone = probe_b(port, b_setup, 1.0)
    done = multiprocessing.Queue()
    stop_at = time.monotonic() + 0.3 + seconds
    a = multiprocessing.Process(target=run_a, args=(port, a_setup, command, stop_at, done))
    a.start()
    time.sleep(0.3)
    beside = probe_b(port, b_setup, seconds)
    times = done.get(timeout=600)
    a.join()
    return (pct(alone, 99), pct(beside, 50), pct(beside, 99), max(beside), statistics.median(times) if times else float("nan"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0, help="B's probe beside A, per command and run")
    ap.add_argument("--keys", type=int, default=200_000, help="A's keys (and its list's length)")
    args = ap.parse_args()
    require_tools(["redis-server", "taskset"], "redis-server util-linux")
    tmp = tempfile.mkdtemp(prefix="terrace-long-")
    servers = start_servers(args.terrace, tmp, [("terrace", [])], "redis-server")
    try:
        for _, port, _, a_setup, b_setup in servers:
            wait_port(port)
            populate(port, a_setup, b_setup, args.keys)
        print(f"B: GET every 1 ms; A: one long command at a time ({args.keys} keys, list of {args.keys}); servers on core 0 "
              f"(terrace --threads 1), clients on core 1; {args.rounds} rounds, {args.seconds:g} s per command; medians")
        results = {(name, label): [] for name, *_ in servers for label, _ in LONG}
        for r in range(args.rounds):
            order = servers if r % 2 == 0 else list(reversed(servers))
            for label, command in LONG:
                for name, port, _, a_setup, b_setup in order:
                    results[(name, label)].append(run_one(port, a_setup, b_setup, command, args.seconds))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        print()
        print("| A runs | server | A's command ms | B p99 alone µs | B p50 beside µs | B p99 beside µs | B max beside µs |")
        print("|---|---|---|---|---|---|---|")
        for label, _ in LONG:
            for name, *_ in servers:
                rows = results[(name, label)]
                med = [statistics.median(x[i] for x in rows) for i in range(5)]
                print(f"| {label} | {name} | {med[4]:.1f} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | {med[3]:.0f} |")
    finally:
        stop_servers(servers, tmp)


if __name__ == "__main__":
    main()
