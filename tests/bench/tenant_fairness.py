#!/usr/bin/env python3
"""CPU fairness between tenants sharing an engine: tenant B's GET latency while tenant A runs a
heavy mix, against B alone — terrace with its fair turns (`tenant_slice_us`: the default,
100, or the values given), terrace with them off (`--tenant-slice-us 0`: first come, first served), and redis-server with the
two tenants in databases 1 and 2 (what a shared Redis gives).

Each server is pinned to core 0 (terrace on one reactor: `--threads 1`, where tenants share
a thread); the clients run on core 1. Tenant A: 8 connections, each keeping 8 heavy commands
in flight (SORT of a 2,000-number list, SUNIONSTORE and ZUNIONSTORE of 1,000-member sets, a
Lua loop of 50,000 additions, SINTERCARD), which saturates the server. Tenant B: one
connection sending a GET every millisecond (after a late reply, the next at once), from a
real-time (SCHED_FIFO) prober so that A's load generator on the same core does not delay it.
B's latency is the time from a GET's send to its reply.

Servers alternate within each round; the table gives the median over rounds of B's p50/p99
alone and beside A, p99 beside A over p99 alone (the issue's goal: within 2x), and A's
commands per second beside B (what A got of the server).

Usage: tests/bench/tenant_fairness.py [--terrace target/release/terrace] [--rounds 3]
       [--seconds 8] [--slices 200,100,50]
"""

import argparse
import multiprocessing
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import free_port, require_tools, wait_port  # noqa: E402

HEAVY = [
    ["SORT", "a:list", "LIMIT", "0", "1"],
    ["SUNIONSTORE", "a:sdst", "a:s1", "a:s2"],
    ["ZUNIONSTORE", "a:zdst", "2", "a:z1", "a:z2"],
    ["EVAL", "local n = 0 for i = 1, 50000 do n = n + i end return n", "0"],
    ["SINTERCARD", "2", "a:s1", "a:s2"],
]
A_CONNECTIONS = 8
A_DEPTH = 8
B_KEYS = 1000


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def reply_end(buf, pos):
    """Where the complete reply starting at `pos` ends, or None if it has not all arrived."""
    eol = buf.find(b"\r\n", pos)
    if eol < 0:
        return None
    kind = buf[pos:pos + 1]
    if kind in (b"+", b"-", b":"):
        return eol + 2
    n = int(buf[pos + 1:eol])
    if kind == b"$":
        end = eol + 2 + max(n, 0) + (2 if n >= 0 else 0)
        return end if len(buf) >= end else None
    if kind == b"*":
        at = eol + 2
        for _ in range(max(n, 0)):
            at = reply_end(buf, at)
            if at is None:
                return None
        return at
    raise SystemExit(f"unexpected reply {buf[pos:pos + 40]!r}")


def replies(sock, count):
    """Reads `count` complete replies; returns them as raw bytes."""
    buf = b""
    pos = 0
    got = 0
    while got < count:
        end = reply_end(buf, pos) if len(buf) > pos else None
        if end is None:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise SystemExit("server closed the connection")
            buf += chunk
            continue
        pos = end
        got += 1
    return buf


def connect(port, setup):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(encode(setup))
    r = replies(s, 1)
    if not r.startswith(b"+OK"):
        raise SystemExit(f"{setup}: {r!r}")
    return s


def populate(port, a_setup, b_setup):
    cmds = [["DEL", "a:list", "a:s1", "a:s2", "a:z1", "a:z2"]]
    for start in range(0, 2000, 500):
        cmds.append(["RPUSH", "a:list"] + [str((i * 7919) % 100003) for i in range(start, start + 500)])
    cmds.append(["SADD", "a:s1"] + [f"m{i}" for i in range(1000)])
    cmds.append(["SADD", "a:s2"] + [f"m{i}" for i in range(500, 1500)])
    cmds.append(["ZADD", "a:z1"] + [x for i in range(1000) for x in (str(i), f"m{i}")])
    cmds.append(["ZADD", "a:z2"] + [x for i in range(1000) for x in (str(i), f"m{i + 500}")])
    send_all(port, a_setup, cmds)
    populate_b(port, b_setup)


def send_all(port, setup, cmds):
    """`cmds` pipelined on one connection set up with `setup`; waits for every reply."""
    c = connect(port, setup)
    c.sendall(b"".join(encode(cmd) for cmd in cmds))
    replies(c, len(cmds))
    c.close()


def populate_b(port, setup):
    """Tenant B's keys, which its prober GETs."""
    send_all(port, setup, [["SET", f"b:{i}", "v" * 16] for i in range(B_KEYS)])


def load_a(port, setup, stop_at, done):
    """Tenant A's closed loop (a child process): A_CONNECTIONS connections, A_DEPTH commands
    each in flight; puts the commands completed into `done`."""
    os.sched_setaffinity(0, {1})
    sel = selectors.DefaultSelector()
    batch = b"".join(encode(HEAVY[i % len(HEAVY)]) for i in range(A_DEPTH))
    state = {}
    for _ in range(A_CONNECTIONS):
        s = connect(port, setup)
        s.setblocking(False)
        s.sendall(batch)
        state[s] = [b"", 0, 0]
        sel.register(s, selectors.EVENT_READ)
    completed = 0
    while time.monotonic() < stop_at:
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            st = state[s]
            try:
                chunk = s.recv(1 << 16)
            except BlockingIOError:
                continue
            st[0] += chunk
            while True:
                end = reply_end(st[0], st[1]) if len(st[0]) > st[1] else None
                if end is None:
                    break
                st[1] = end
                st[2] += 1
            if st[2] == A_DEPTH:
                completed += A_DEPTH
                state[s] = [b"", 0, 0]
                s.setblocking(True)
                s.sendall(batch)
                s.setblocking(False)
    done.put(completed)


def probe_b(port, setup, seconds):
    """Tenant B: a GET every millisecond for `seconds` (the next one as soon as a late reply
    arrives; no backlog builds up); latencies in microseconds, send to reply. The prober runs
    real-time (SCHED_FIFO) so that it reads a reply as soon as it arrives: what it measures is
    the server's delay, not its own wait for core 1 behind A's load generator."""
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    try:
        return probe_b_timed(port, setup, seconds)
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def probe_b_timed(port, setup, seconds):
    s = connect(port, setup)
    lat = []
    period = 0.001
    due = time.perf_counter()
    end = due + seconds
    i = 0
    while due < end:
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        sent = time.perf_counter()
        s.sendall(encode(["GET", f"b:{i % B_KEYS}"]))
        r = replies(s, 1)
        if not r.startswith(b"$16"):
            raise SystemExit(f"GET: {r!r}")
        done = time.perf_counter()
        lat.append((done - sent) * 1e6)
        due = max(due + period, done)
        i += 1
    s.close()
    return lat


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def run_one(port, a_setup, b_setup, seconds):
    """B alone, then B beside A: (p50 alone, p99 alone, p50 beside, p99 beside, A's cmds/s)."""
    alone = probe_b(port, b_setup, seconds / 2)
    done = multiprocessing.Queue()
    warm = 0.5
    stop_at = time.monotonic() + warm + seconds + 0.5
    loader = multiprocessing.Process(target=load_a, args=(port, a_setup, stop_at, done))
    loader.start()
    time.sleep(warm)
    started = time.monotonic()
    beside = probe_b(port, b_setup, seconds)
    elapsed = time.monotonic() - started + 0.5
    a_cmds = done.get(timeout=60)
    loader.join()
    return (pct(alone, 50), pct(alone, 99), pct(beside, 50), pct(beside, 99), a_cmds / (elapsed + warm))


def start_servers(terrace, tmp, variants, redis_name):
    """terrace engines (`--threads 1`, one per (name, extra flags) in `variants`) and
    redis-server, pinned to core 0, this process to core 1: (name, port, process, A's setup,
    B's setup) each — tenants A and B are namespaces a and b on terrace, databases 1 and 2
    on Redis."""
    servers = []
    for name, extra in variants:
        port = free_port()
        data = os.path.join(tmp, str(port))
        os.makedirs(data)
        p = subprocess.Popen(["taskset", "-c", "0", terrace, "engine", "--port", str(port), "--threads", "1",
                              "--data-dir", data] + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        servers.append((name, port, p, ["TERRACE.NAMESPACE", "a"], ["TERRACE.NAMESPACE", "b"]))
    port = free_port()
    p = subprocess.Popen(["taskset", "-c", "0", "redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                          "--dir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers.append((redis_name, port, p, ["SELECT", "1"], ["SELECT", "2"]))
    os.sched_setaffinity(0, {1})
    return servers


def stop_servers(servers, tmp):
    for _, _, p, _, _ in servers:
        p.terminate()
    for _, _, p, _, _ in servers:
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0, help="B's probe beside A, per run")
    ap.add_argument("--slices", default="100", help="tenant_slice_us values to run terrace with (besides 0)")
    args = ap.parse_args()
    require_tools(["redis-server", "taskset"], "redis-server util-linux")
    tmp = tempfile.mkdtemp(prefix="terrace-fairness-")
    variants = [(f"terrace (slice {us} µs)", ["--tenant-slice-us", us]) for us in args.slices.split(",")]
    servers = start_servers(args.terrace, tmp, variants + [("terrace (slice 0: off)", ["--tenant-slice-us", "0"])], "redis-server (db 1, db 2)")
    try:
        for _, port, _, a_setup, b_setup in servers:
            wait_port(port)
            populate(port, a_setup, b_setup)
        print(f"B: GET every 1 ms; A: {A_CONNECTIONS} connections x {A_DEPTH} heavy commands in flight; servers on core 0 "
              f"(terrace --threads 1), clients on core 1; {args.rounds} rounds, {args.seconds:g} s beside A per run; medians")
        results = {name: [] for name, *_ in servers}
        for r in range(args.rounds):
            order = servers if r % 2 == 0 else list(reversed(servers))
            for name, port, _, a_setup, b_setup in order:
                results[name].append(run_one(port, a_setup, b_setup, args.seconds))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        print()
        print("| server | B p50 alone µs | B p99 alone µs | B p50 beside A µs | B p99 beside A µs | p99 beside / alone | A commands/s |")
        print("|---|---|---|---|---|---|---|")
        for name, *_ in servers:
            rows = results[name]
            med = [statistics.median(x[i] for x in rows) for i in range(5)]
            ratio = statistics.median(x[3] / x[1] for x in rows)
            print(f"| {name} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | {med[3]:.0f} | {ratio:.2f}x | {med[4]:.0f} |")
    finally:
        stop_servers(servers, tmp)


if __name__ == "__main__":
    main()
