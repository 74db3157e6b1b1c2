//! Runs redis-py's own command tests (tests/test_commands.py of the redis 5.0.8 sdist, prepared
//! by tests/compat/setup-redis-py.sh) against a real `terrace engine`, and through a real
//! `terrace proxy` in front of two engines.
//!
//! Every test must pass except those listed in tests/compat/redis-py-known-failures.txt
//! (commands not implemented yet, each with its reason). A failure outside that list fails
//! this test; so does a suite that did not run.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::{Engine, Proxy};

const MIN_PASSED: usize = 410;
const MIN_PASSED_PROXY: usize = 335;

fn known_failures() -> BTreeSet<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/redis-py-known-failures.txt")).expect("read known failures");
    text.lines().map(|l| l.split('#').next().unwrap().trim()).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// Runs test_commands.py against `port`: (passed count, names of failed tests, pytest output).
fn run_suite(url: &str) -> (usize, BTreeSet<String>, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/redis-py");
    let python = dir.join("venv/bin/python");
    assert!(
        python.exists() && dir.join("tests/test_commands.py").exists(),
        "redis-py's suite is missing: run tests/run.sh (or tests/compat/setup-redis-py.sh) first"
    );
    let out = Command::new(&python)
        .current_dir(&dir)
        .args([
            "-m",
            "pytest",
            "tests/test_commands.py",
            &format!("--redis-url={url}"),
            "-m",
            "not onlycluster and not redismod and not ssl",
            "-q",
            "-rA",
            "-p",
            "no:cacheprovider",
            "--timeout",
            "60",
        ])
        .output()
        .expect("run pytest");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut passed = 0;
    let mut failed = BTreeSet::new();
    for line in text.lines() {
        let name = |l: &str| l.split_whitespace().nth(1).unwrap_or("").split("::").last().unwrap_or("").to_string();
        if line.starts_with("PASSED ") {
            passed += 1;
        } else if line.starts_with("FAILED ") || line.starts_with("ERROR ") {
            failed.insert(name(line));
        }
    }
    (passed, failed, text)
}

fn summary(text: &str) -> String {
    text.lines().rev().find(|l| l.contains(" passed") || l.contains(" failed")).unwrap_or("").to_string()
}

#[test]
fn redis_py_suite() {
    // As test servers are run (Redis's own suite's configuration has DEBUG on).
    let e = Engine::start(&["--enable-debug-command", "yes"]);
    let (passed, failed, text) = run_suite(&format!("redis://127.0.0.1:{}/0", e.port));
    eprintln!("redis-py suite on terrace: {}", summary(&text));
    let known = known_failures();
    let unexpected: Vec<_> = failed.difference(&known).collect();
    let fixed: Vec<_> = known.difference(&failed).collect();
    if !fixed.is_empty() {
        eprintln!("known failures that now pass (prune the list): {fixed:?}");
    }
    assert!(unexpected.is_empty(), "unexpected redis-py failures: {unexpected:?}\n{}", tail(&text));
    assert!(passed >= MIN_PASSED, "only {passed} redis-py tests passed\n{}", tail(&text));
}

/// The same suite through the proxy in front of two engines. Tests whose keys span both
/// engines fail with CROSSSLOT by design (as on a Redis Cluster), as do the connection-admin
/// commands the proxy refuses (CLIENT KILL/PAUSE/TRACKING, ACL, MODULE, REPLICAOF); the rest
/// must keep passing.
#[test]
fn redis_py_suite_through_the_proxy() {
    let debug = ["--enable-debug-command", "yes"];
    let engines = [Engine::start(&debug), Engine::start(&debug)];
    // As the proxy's admin user: the suite sets CONFIG, reads SLOWLOG and runs DEBUG, which
    // are the operator's through a proxy tenants share (tenant_isolation.rs).
    let proxy = Proxy::start(&[&engines[0], &engines[1]], &[], &[("TERRACE_PROXY_ADMIN_PASSWORD", "suite-admin")]);
    let (passed, failed, text) = run_suite(&format!("redis://admin:suite-admin@127.0.0.1:{}/0", proxy.port));
    eprintln!("redis-py suite through the proxy: {}", summary(&text));
    for must_pass in ["test_mget", "test_mset", "test_delete", "test_exists", "test_scan_iter", "test_keys", "test_dbsize", "test_randomkey"] {
        assert!(!failed.contains(must_pass), "{must_pass} failed through the proxy\n{}", tail(&text));
    }
    assert!(passed >= MIN_PASSED_PROXY, "only {passed} redis-py tests passed through the proxy\n{}", tail(&text));
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
