//! Redis 7.0.15's own TCL test suite against the engine, a fresh engine per test file
//! (tests/compat/redis_tcl.py runs it; tests/run.sh fetches the suite from Debian's source
//! package). Every failure must be on tests/compat/redis-tcl-known-failures.txt with its
//! reason, no file may abort on an exception that is not listed, and at least `MIN_PASSED`
//! tests must pass. COMPATIBILITY.md has the per-file counts beside redis-server's.

use std::collections::BTreeSet;
use std::process::Command;

/// Passes at the last count (COMPATIBILITY.md); raise it as tests are fixed.
const MIN_PASSED: usize = 1751;

/// `FILE<TAB>NAME` of the known failures (`#` starts a comment; the reason follows the name
/// after another tab).
fn known_failures() -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compat/redis-tcl-known-failures.txt")).expect("the known-failures list");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut parts = l.split('\t');
            let file = parts.next().unwrap_or_default().to_string();
            let name = parts.next().unwrap_or_else(|| panic!("no test name in {l:?}")).to_string();
            assert!(parts.next().is_some_and(|r| !r.trim().is_empty()), "a known failure without its reason: {l:?}");
            (file, name)
        })
        .collect()
}

/// COMPATIBILITY.md shows the known failures as a table between its `known-failures` marks;
/// it must say what the list says.
#[test]
fn compatibility_md_shows_the_known_failures() {
    let md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/COMPATIBILITY.md")).expect("COMPATIBILITY.md");
    let (_, rest) = md.split_once("<!-- known-failures: begin").expect("the begin mark in COMPATIBILITY.md");
    let (table, _) = rest.split_once("<!-- known-failures: end -->").expect("the end mark in COMPATIBILITY.md");
    let shown: BTreeSet<(String, String)> = table
        .lines()
        .filter(|l| l.starts_with("| unit/"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            (cells[0].to_string(), cells[1].to_string())
        })
        .collect();
    let known = known_failures();
    assert_eq!(shown, known, "COMPATIBILITY.md's table and tests/compat/redis-tcl-known-failures.txt disagree: update the table");
}

#[test]
fn redis_tcl_suite() {
    let out = std::env::temp_dir().join(format!("redis-tcl-{}.tsv", std::process::id()));
    let logs = std::env::temp_dir().join(format!("redis-tcl-logs-{}", std::process::id()));
    let status = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compat/redis_tcl.py"))
        .args(["--terrace", env!("CARGO_BIN_EXE_terrace"), "--out"])
        .arg(&out)
        .arg("--logs")
        .arg(&logs)
        .status()
        .expect("run tests/compat/redis_tcl.py");
    assert!(status.success(), "tests/compat/redis_tcl.py failed");
    let results = std::fs::read_to_string(&out).expect("the results file");
    let mut passed = 0;
    let mut failed = BTreeSet::new();
    for line in results.lines() {
        let mut parts = line.splitn(3, '\t');
        let (file, status, name) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap_or(""));
        match status {
            "ok" => passed += 1,
            "err" | "exception" => {
                failed.insert((file.to_string(), name.to_string()));
            }
            _ => {}
        }
    }
    let known = known_failures();
    let unexpected: Vec<_> = failed.difference(&known).collect();
    let fixed: Vec<_> = known.difference(&failed).collect();
    eprintln!("Redis TCL suite on terrace: {passed} passed, {} failed ({} known)", failed.len(), failed.intersection(&known).count());
    if !fixed.is_empty() {
        eprintln!("known failures that now pass (take them off the list): {fixed:#?}");
    }
    assert!(unexpected.is_empty(), "unexpected failures (each file's output is in {}): {unexpected:#?}", logs.display());
    assert!(passed >= MIN_PASSED, "only {passed} tests passed (at least {MIN_PASSED} did before)");
    let _ = std::fs::remove_file(&out);
}
