#!/usr/bin/env python3
"""The engine's layers only look down: every module is given a layer, and a reference from
one module to another in a higher layer is an upward import. This script finds every
`crate::…` and `super::…` path in engine/src (tests modules and comments left out) and
compares the upward ones with tests/layers-allowed.txt, the known ones still to be removed.

It fails on an upward import that is not on the list (a new one), and on a listed one that
no longer exists (take it off: the list only shrinks). It also fails when a command handler
takes shard locks itself (see `handler_locks`). Run it from anywhere; CI runs it from
tests/run.sh. `--write` rewrites the list from the code (to record a removal).
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "engine" / "src"
ALLOWED = ROOT / "tests" / "layers-allowed.txt"

# Lowest first. A module belongs to the layer of the longest prefix listed here.
LAYERS = [
    ("util", ["alloc", "mapped", "probe", "cost", "clock", "limits", "files", "lock_order"]),
    ("protocol", ["protocol"]),
    ("values", ["keyspace::value", "keyspace::ranked", "keyspace::stream", "keyspace::access"]),
    ("codecs", [
        "compress::bytes", "compress::zstd", "compress::pattern", "compress::fsst", "compress::ppm",
        "compress::rangecoder", "compress::train", "compress::sample", "compress::advise", "compress::store",
        "compress::roundtrip_tests", "compress",
        "rdb",
    ]),
    ("keyspace", ["keyspace", "tier", "compress::tenant", "compress::pass"]),
    ("services", ["acl", "clients", "latency", "pubsub", "monitor", "notify", "tracking", "stats", "storage", "wal", "scripting", "config", "replication", "migration"]),
    # The node's shared state (`Server`: keyspace, services, clients, runtime settings) that
    # commands are given, and the snapshot of all of it (SAVE, loading at start).
    ("node", ["server::state", "server::namespaces", "server::elastic", "snapshot"]),
    ("command", ["command"]),
    ("server", ["server", ""]),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
PREFIXES = sorted(((p, name) for name, ps in LAYERS for p in ps), key=lambda x: -len(x[0]))


def layer_of(path):
    """The layer of a module path such as 'command::stats'."""
    for prefix, name in PREFIXES:
        if prefix == "" or path == prefix or path.startswith(prefix + "::"):
            return name
    raise ValueError(path)


def module_of(file):
    parts = list(file.relative_to(SRC).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return parts


def strip(text):
    """The code without line comments and without `#[cfg(test)] mod … { … }` blocks (their
    braces are matched by counting, which format strings do not upset: theirs pair up)."""
    text = "\n".join(re.sub(r"//.*", "", line) for line in text.splitlines())
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
        if not m:
            return text
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[: m.start()] + text[i:]


IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def expand_groups(text):
    """`crate::a::{b, c::d}` becomes `crate::a::b crate::a::c::d` (one level of braces)."""
    def repl(m):
        head = m.group(1)
        items = [i.strip() for i in m.group(2).split(",") if i.strip()]
        return " ".join(head + "::" + re.split(r"\s|;", i)[0] for i in items)

    for _ in range(3):
        text = re.sub(r"((?:crate|super)(?:::" + IDENT + r")*)::\{([^{}]*)\}", repl, text)
    return text


def references(file):
    """(target module path) for every crate:: and super:: path in the file."""
    here = module_of(file)
    text = expand_groups(strip(file.read_text()))
    for m in re.finditer(r"\b((?:crate|super)(?:::(?:super|" + IDENT + r"))+)", text):
        parts = m.group(1).split("::")
        if parts[0] == "crate":
            base, rest = [], parts[1:]
        else:
            base = list(here)
            # In a file module (not mod.rs), `super` is the parent of the file's own module.
            rest = parts
            while rest and rest[0] == "super":
                base = base[:-1]
                rest = rest[1:]
        # The module part of the path: lowercase segments (types and functions end it).
        mods = []
        for p in rest:
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", p):
                break
            mods.append(p)
        target = base + mods
        yield "::".join(target)


# Modules the engine re-exports from another crate of the workspace (lib.rs `pub use`).
REEXPORTED = {"protocol", "cost"}


def module_exists(path):
    if not path or path in REEXPORTED:
        return True
    p = SRC.joinpath(*path.split("::"))
    return p.with_suffix(".rs").exists() or (p / "mod.rs").exists()


def longest_module(path):
    """The longest prefix of a path that is a module (the rest are items)."""
    parts = path.split("::") if path else []
    while parts and not module_exists("::".join(parts)):
        parts.pop()
    return "::".join(parts)


def upward_imports():
    found = set()
    for file in sorted(SRC.rglob("*.rs")):
        here = "::".join(module_of(file))
        for target in references(file):
            target = longest_module(target)
            if RANK[layer_of(target)] > RANK[layer_of(here)]:
                found.add(f"{file.relative_to(ROOT)} -> {target}")
    return found


# What lets code wait for shard locks: the keyspace's `LockCap` (its lock methods and every
# background routine that locks take one), and constructing a keyspace (which makes one).
# The type system already keeps handlers from locking without a capability; this keeps one
# from reaching them: only the pipeline (which locks what a command declared before its
# handler runs) and work outside the command layer may name it.
LOCKING = re.compile(r"\bLockCap\b|\bKeyspace::new\s*\(|\b(locks|cap)\s*:\s*&")


def handler_locks():
    """Mentions of the lock capability in the command layer outside `command::pipeline`:
    handlers reach shards only through the command's `Data` (its guards, or `visit` for the
    commands that declare `Lock::Visit`); a handler locking a shard itself could deadlock
    against its own guards (EXEC and scripts hold every shard) or break the global lock
    order."""
    found = []
    for file in sorted((SRC / "command").rglob("*.rs")):
        if "pipeline" in file.relative_to(SRC / "command").parts:
            continue
        for line in strip(file.read_text()).splitlines():
            if LOCKING.search(line):
                found.append(f"{file.relative_to(ROOT)}: {line.strip()}")
    return found


def main():
    locks = handler_locks()
    for line in locks:
        print(f"a handler takes shard locks (declare them in the command table instead): {line}")
    found = upward_imports()
    if "--write" in sys.argv:
        ALLOWED.write_text(
            "# Upward imports in the engine still to be removed (tests/layers.py). The list only shrinks:\n"
            "# a new upward import fails CI, and so does an entry that is gone from the code.\n"
            + "".join(line + "\n" for line in sorted(found))
        )
        print(f"{len(found)} upward imports written to {ALLOWED.relative_to(ROOT)}")
        return 0
    allowed = {l.strip() for l in ALLOWED.read_text().splitlines() if l.strip() and not l.startswith("#")}
    new = sorted(found - allowed)
    gone = sorted(allowed - found)
    for line in new:
        print(f"upward import (a lower layer must not use a higher one): {line}")
    for line in gone:
        print(f"no longer in the code, take it off tests/layers-allowed.txt: {line}")
    print(f"layers: {len(found)} known upward imports left, {len(new)} new, {len(gone)} gone; {len(locks)} handlers locking")
    return 1 if new or gone or locks else 0


if __name__ == "__main__":
    sys.exit(main())
