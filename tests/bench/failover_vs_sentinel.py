#!/usr/bin/env python3
"""Failover, side by side: a Terrace primary with one replica behind the proxy and the console
(its coordinator: checks every 500 ms, fails over after 2000 ms, the defaults), against a
redis-server primary with one replica watched by one redis-sentinel (quorum 1; Sentinel's
documented default `down-after-milliseconds 30000`, and 2000). A writer sends SETs of new keys
as fast as one connection goes (to the proxy; for Redis to the master Sentinel names, asked
again after an error); each round kills the primary with SIGKILL and measures the time until
the first SET that succeeds after the kill, and counts the SETs answered OK before the kill
that the new primary does not have (written without WAIT: lost with the primary). Then the
killed server comes back empty on its port and becomes a replica (the console and Sentinel
see to it) and the next round kills the new primary.

Usage: tests/bench/failover_vs_sentinel.py [--terrace target/release/terrace] [--rounds 10]
       [--default-rounds 3]
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_redis import cli, free_port, require_tools, wait_port  # noqa: E402
from replica_of_redis import replication_field, wait_until  # noqa: E402


class Resp:
    """The smallest RESP client: one request, one reply line (or bulk) at a time."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=2)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def call(self, *args):
        req = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() if isinstance(x, str) else x for x in args))
        self.s.sendall(req)
        first = self.line()
        if first.startswith(b"$") and first != b"$-1":
            return self.line()
        if first.startswith(b"*") and first not in (b"*-1", b"*0"):
            return [self.call_rest() for _ in range(int(first[1:]))]
        if first.startswith(b"-"):
            raise RuntimeError(first.decode())
        return first

    def call_rest(self):
        first = self.line()
        return self.line() if first.startswith(b"$") and first != b"$-1" else first


class Writer(threading.Thread):
    """SETs of new keys, one after another; `where()` says the port to write to."""

    def __init__(self, where):
        super().__init__(daemon=True)
        self.where, self.stop, self.acked, self.n = where, False, [], 0
        self.killed_at, self.back_after = None, None

    def run(self):
        conn = None
        while not self.stop:
            try:
                if conn is None:
                    conn = Resp(self.where())
                self.n += 1
                key = f"k:{self.n}"
                if conn.call("SET", key, str(self.n)) == b"+OK":
                    now = time.monotonic()
                    if self.killed_at is None:
                        self.acked.append(key)
                    elif self.back_after is None:
                        self.back_after = now - self.killed_at
            except Exception:
                conn = None
                time.sleep(0.01)


def one_kill(where, kill, survivor, timeout):
    """Writes through the server `where()` names, `kill()`s the primary after 1.5 s: (seconds
    until a SET succeeds again, SETs answered OK before the kill that `survivor()` lacks,
    SETs answered OK before the kill)."""
    w = Writer(where)
    w.start()
    time.sleep(1.5)
    kill()
    w.killed_at = time.monotonic()
    wait_until(lambda: w.back_after is not None, timeout)
    time.sleep(0.5)
    w.stop = True
    w.join()
    return w.back_after, lost(survivor(), w.acked), len(w.acked)


def linked(port):
    """Whether the server at `port` is a replica with its link up."""
    try:
        return replication_field(port, "master_link_status") == "up"
    except (KeyError, subprocess.CalledProcessError):
        return False


def lost(port, keys):
    c = Resp(port)
    missing = 0
    for i in range(0, len(keys), 500):
        got = c.call("MGET", *keys[i:i + 500])
        missing += sum(1 for v in got if v == b"$-1")
    return missing


def terrace_rounds(terrace, tmp, rounds):
    ports = [free_port(), free_port()]
    proxy, console = free_port(), free_port()
    env = dict(os.environ, TERRACE_PROXY_ADMIN_PASSWORD="bench-admin", TERRACE_ADMIN_PASSWORD="bench-console")
    procs = {}

    def engine(port):
        d = tempfile.mkdtemp(dir=tmp)
        procs[port] = subprocess.Popen(["taskset", "-c", "0", terrace, "engine", "--port", str(port), "--threads", "1", "--data-dir", d],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)

    for p in ports:
        engine(p)
    px = subprocess.Popen(["taskset", "-c", "1", terrace, "proxy", "--port", str(proxy), "--memcache-port", "0", "--engines", f"127.0.0.1:{ports[0]}"],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    co = subprocess.Popen(["taskset", "-c", "1", terrace, "console", "--port", str(console), "--db", os.path.join(tmp, "console.db"),
                           "--engines", f"127.0.0.1:{ports[0]}", "--replicas", f"127.0.0.1:{ports[1]}", "--proxies", f"127.0.0.1:{proxy}"],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = []
    try:
        wait_port(proxy)
        primary, replica = ports
        for r in range(rounds):
            wait_until(lambda: linked(replica), 60)
            dead = procs[primary]
            results.append(one_kill(lambda: proxy, lambda: (dead.kill(), dead.wait()), lambda: proxy, 120))
            print(f"terrace round {r + 1}: writes back after {results[-1][0]:.2f} s, {results[-1][1]} of {results[-1][2]} lost", flush=True)
            engine(primary)  # back empty: the console makes it the new primary's replica
            primary, replica = replica, primary
    finally:
        for p in list(procs.values()) + [px, co]:
            p.kill()
            p.wait()
    return results


def sentinel_rounds(tmp, rounds, down_after):
    ports = [free_port(), free_port()]
    sport = free_port()
    procs = {}

    def server(port, replica_of=None):
        d = tempfile.mkdtemp(dir=tmp)
        cmd = ["taskset", "-c", "0", "redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", d]
        if replica_of:
            cmd += ["--replicaof", "127.0.0.1", str(replica_of)]
        procs[port] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)

    server(ports[0])
    server(ports[1], ports[0])
    conf = os.path.join(tmp, f"sentinel-{sport}.conf")
    with open(conf, "w") as f:
        f.write(f"port {sport}\nsentinel monitor m 127.0.0.1 {ports[0]} 1\n")
        if down_after is not None:
            f.write(f"sentinel down-after-milliseconds m {down_after}\n")
    se = subprocess.Popen(["taskset", "-c", "1", "redis-sentinel", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(sport)

    def master():
        return int(Resp(sport).call("SENTINEL", "get-master-addr-by-name", "m")[1])

    results = []
    try:
        for r in range(rounds):
            primary = master()
            replica = ports[1] if primary == ports[0] else ports[0]
            wait_until(lambda: linked(replica), 120)
            dead = procs[primary]
            results.append(one_kill(master, lambda: (dead.kill(), dead.wait()), master, 300))
            label = "default" if down_after is None else str(down_after)
            print(f"sentinel ({label}) round {r + 1}: writes back after {results[-1][0]:.2f} s, {results[-1][1]} of {results[-1][2]} lost", flush=True)
            server(primary)  # back empty: Sentinel makes it the new master's replica
    finally:
        for p in list(procs.values()) + [se]:
            p.kill()
            p.wait()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terrace", default="target/release/terrace")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--default-rounds", type=int, default=3, help="rounds with Sentinel's 30 s default")
    args = ap.parse_args()
    require_tools(["redis-server", "redis-sentinel", "redis-cli", "taskset"], "redis-server redis-sentinel redis-tools util-linux")
    tmp = tempfile.mkdtemp(prefix="terrace-failover-bench-")
    try:
        rows = [("terrace (console: 500 ms checks, 2000 ms)", terrace_rounds(args.terrace, tmp, args.rounds)),
                ("redis-sentinel, down-after-milliseconds 2000", sentinel_rounds(tmp, args.rounds, 2000))]
        if args.default_rounds:
            rows.append(("redis-sentinel, default (30000)", sentinel_rounds(tmp, args.default_rounds, None)))
        print()
        print("| system | rounds | writes back after kill -9: median s | max s | SETs answered OK, then lost (median per kill) |")
        print("|---|---|---|---|---|")
        for name, res in rows:
            times = [r[0] for r in res]
            print(f"| {name} | {len(res)} | {statistics.median(times):.2f} | {max(times):.2f} | "
                  f"{statistics.median(r[1] for r in res):.0f} of {statistics.median(r[2] for r in res):,.0f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
