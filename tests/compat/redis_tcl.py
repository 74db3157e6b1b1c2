#!/usr/bin/env python3
"""Runs Redis 7.0.15's own TCL test suite (tests/compat/setup-redis-tcl.sh fetches it) against
an external server, one fresh server per test file, and reports every test's outcome.

    tests/compat/redis_tcl.py --terrace target/debug/terrace [--out results.tsv]
    tests/compat/redis_tcl.py --redis-server                 (the reference counts)

The files are the unit/ entries of the suite's `all_tests` list from printver to replybufsize;
each runs as
`./runtest --host … --port … --single unit/FILE --clients 1` without the tests tagged
needs:debug, needs:repl, needs:save, needs:reset and large-memory (tests tagged
external:skip skip themselves against an external server). --out writes one line per test:
FILE<TAB>ok|err|exception|skip|ignore<TAB>NAME (ignore: left out by a tag, skip: skipped by
the test itself). The table printed at the end has the counts per file.
"""

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SUITE = ROOT / "target" / "redis-tcl" / "redis"
TAGS = ["-needs:debug", "-needs:repl", "-needs:save", "-needs:reset", "-large-memory"]
# One test may wait this long (the suite's own default is 10 minutes). Not less: hyperloglog's
# "Fuzzing dense/sparse encoding" spends ~40 s in the Tcl client alone on this 2-core machine
# (1,000 rounds of 3,000 `expr rand()` items), and timed out at 60 s in a CI run that shared the
# machine with a build.
TEST_TIMEOUT_S = 180
# A whole file may take this long before its server is killed (the file counts as aborted).
FILE_TIMEOUT_S = 900


def unit_files():
    """The unit/ entries of test_helper.tcl's `all_tests` from printver to replybufsize, in
    its order (the cluster files after them need a cluster)."""
    helper = (SUITE / "tests" / "test_helper.tcl").read_text()
    block = re.search(r"set ::all_tests \{(.*?)\}", helper, re.S)
    if not block:
        raise SystemExit("no all_tests list in test_helper.tcl")
    units = [t for t in block.group(1).split() if t.startswith("unit/")]
    return units[: units.index("unit/replybufsize") + 1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_terrace(binary, data_dir):
    p = subprocess.Popen(
        [binary, "engine", "--port", "0", "--data-dir", data_dir, "--enable-debug-command", "yes"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    m = re.search(r":(\d+)\s*$", line)
    if not m:
        p.kill()
        raise SystemExit(f"terrace engine did not start: {line!r}")
    return p, int(m.group(1))


def start_redis(data_dir):
    port = free_port()
    p = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", data_dir,
         "--enable-debug-command", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise SystemExit("redis-server did not start")


RESULT = re.compile(r"^\[(ok|err|exception|skip|ignore)\]:\s*(.*)$")


def parse(output):
    """(status, name) for each test line of runtest's output."""
    results = []
    timed_out = False
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        # A test that ran past the timeout ends the file: "[TIMEOUT]: clients state report
        # follows." then "sock… => (IN PROGRESS) NAME".
        if line.startswith("[TIMEOUT]:"):
            timed_out = True
            continue
        m = re.search(r"=> \(IN PROGRESS\) (.*)$", line)
        if timed_out and m:
            results.append(("exception", f"timed out: {m.group(1)}"))
            timed_out = False
            continue
        m = RESULT.match(line)
        if not m:
            continue
        status, rest = m.groups()
        if status == "ok":
            name = re.sub(r"\s*\(\d+ ms\)$", "", rest)
        elif status == "err":
            name = re.sub(r" in tests/unit/\S+$", "", rest)
        else:
            name = rest
        results.append((status, name))
    return results


def run_file(unit, start, job):
    data_dir = tempfile.mkdtemp(prefix="redis-tcl-")
    server, port = start(data_dir)
    # Each job's harness listens on ports of its own (two would race for the same one).
    cmd = ["./runtest", "--host", "127.0.0.1", "--port", str(port), "--single", unit, "--clients", "1",
           "--timeout", str(TEST_TIMEOUT_S), "--baseport", str(21111 + 1000 * job), "--portcount", "500"]
    for t in TAGS:
        cmd += ["--tags", t]
    try:
        out = subprocess.run(cmd, cwd=SUITE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", timeout=FILE_TIMEOUT_S).stdout
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += f"\n[exception]: the file did not finish within {FILE_TIMEOUT_S} s\n"
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
    results = parse(out)
    if not results and "All tests passed" not in out:
        results = [("exception", "no test ran: " + " ".join(out.strip().splitlines()[-3:]))]
    return results, out


def main():
    ap = argparse.ArgumentParser()
    who = ap.add_mutually_exclusive_group(required=True)
    who.add_argument("--terrace", help="the terrace binary")
    who.add_argument("--redis-server", action="store_true")
    ap.add_argument("--files", help="comma-separated unit/FILE names (default: all)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", help="write FILE<TAB>STATUS<TAB>NAME lines here")
    ap.add_argument("--logs", help="keep each file's runtest output in this directory")
    args = ap.parse_args()
    if not (SUITE / "runtest").exists():
        raise SystemExit(f"{SUITE} is missing: run tests/compat/setup-redis-tcl.sh")
    files = args.files.split(",") if args.files else unit_files()
    start = start_redis if args.redis_server else (lambda d: start_terrace(args.terrace, d))

    results = {}
    todo = list(files)
    lock = threading.Lock()

    def worker(job):
        while True:
            with lock:
                if not todo:
                    return
                unit = todo.pop(0)
            began = time.time()
            res, out = run_file(unit, start, job)
            if args.logs:
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                (Path(args.logs) / (unit.replace("/", "_") + ".log")).write_text(out)
            with lock:
                results[unit] = res
                ok = sum(1 for s, _ in res if s == "ok")
                print(f"{unit}: {ok} ok, {len(res) - ok} other ({time.time() - began:.0f} s)", file=sys.stderr, flush=True)

    threads = [threading.Thread(target=worker, args=(j,)) for j in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    if args.out:
        with open(args.out, "w") as f:
            for unit in files:
                for status, name in results[unit]:
                    f.write(f"{unit}\t{status}\t{name}\n")
    print("| file | ok | err | exception | skipped | left out by tag |")
    print("|---|---|---|---|---|---|")
    total = {"ok": 0, "err": 0, "exception": 0, "skip": 0, "ignore": 0}
    for unit in files:
        c = {k: sum(1 for s, _ in results[unit] if s == k) for k in total}
        for k in total:
            total[k] += c[k]
        print(f"| {unit} | {c['ok']} | {c['err']} | {c['exception']} | {c['skip']} | {c['ignore']} |")
    print(f"| total | {total['ok']} | {total['err']} | {total['exception']} | {total['skip']} | {total['ignore']} |")


if __name__ == "__main__":
    main()
