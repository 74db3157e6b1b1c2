//! End-to-end tests of the WAL: real engines killed with SIGKILL mid-load, restarted, and
//! checked against every write they acknowledged.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, info_field, q, temp_dir, Engine, RedisPort};

/// What one writer thread saw acknowledged.
#[derive(Default, Clone)]
struct Acked {
    /// SET w{t}:{n} → value, acknowledged.
    sets: Vec<(String, String)>,
    /// INCR c{t}: the last acknowledged value.
    counter: i64,
    /// RPUSH l{t}: the last acknowledged length.
    list_len: i64,
}

/// Writes from `threads` connections until the engine dies; returns what each saw
/// acknowledged (cumulative over rounds: `prev`).
fn load_until_killed(port: u16, threads: usize, prev: &[Acked], round: usize, kill_after: Duration, kill: impl FnOnce()) -> Vec<Acked> {
    let stop = Arc::new(AtomicBool::new(false));
    let results: Vec<Arc<Mutex<Acked>>> = prev.iter().cloned().map(|a| Arc::new(Mutex::new(a))).collect();
    let mut handles = Vec::new();
    for (t, acked) in results.iter().enumerate().take(threads) {
        let (acked, stop) = (acked.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else { return };
            let Ok(mut c) = client.get_connection() else { return };
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let key = format!("w{t}:{round}:{n}");
                let value = format!("v{n}-{}", "x".repeat((n % 50) as usize));
                let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg(&value).query(&mut c);
                if r.is_err() {
                    return;
                }
                acked.lock().unwrap().sets.push((key, value));
                let r: redis::RedisResult<i64> = redis::cmd("INCR").arg(format!("c{t}")).query(&mut c);
                match r {
                    Ok(v) => acked.lock().unwrap().counter = v,
                    Err(_) => return,
                }
                // A transaction: both or neither.
                let r: redis::RedisResult<(i64, i64)> =
                    redis::pipe().atomic().cmd("RPUSH").arg(format!("l{t}")).arg(n).cmd("HINCRBY").arg(format!("h{t}")).arg("n").arg(1).query(&mut c);
                match r {
                    Ok((len, _)) => acked.lock().unwrap().list_len = len,
                    Err(_) => return,
                }
            }
        }));
    }
    std::thread::sleep(kill_after);
    kill();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    results.iter().map(|a| a.lock().unwrap().clone()).collect()
}

fn check(c: &mut redis::Connection, acked: &[Acked]) {
    for (t, a) in acked.iter().enumerate() {
        for chunk in a.sets.chunks(500) {
            let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
            let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(c).unwrap();
            for ((k, v), g) in chunk.iter().zip(got) {
                assert_eq!(g.as_deref(), Some(v.as_str()), "acknowledged SET {k} lost");
            }
        }
        let counter: i64 = redis::cmd("GET").arg(format!("c{t}")).query::<Option<i64>>(c).unwrap().unwrap_or(0);
        // The write in flight at the kill may or may not have made it: one more at most.
        assert!(counter == a.counter || counter == a.counter + 1, "c{t}: {counter}, acknowledged {}", a.counter);
        let len: i64 = q(c, &["LLEN", &format!("l{t}")]);
        assert!(len == a.list_len || len == a.list_len + 1, "l{t}: {len}, acknowledged {}", a.list_len);
        let h: i64 = redis::cmd("HGET").arg(format!("h{t}")).arg("n").query::<Option<i64>>(c).unwrap().unwrap_or(0);
        assert_eq!(h, len, "the transaction's two writes are both there or both not");
    }
}

fn crash_rounds(mode_flags: &[&str], rounds: usize) {
    crash_rounds_then(mode_flags, rounds, |_, _| {});
}

/// As `crash_rounds`, running `after_restart` on each restarted engine before the next load.
fn crash_rounds_then(mode_flags: &[&str], rounds: usize, after_restart: impl Fn(&mut redis::Connection, usize)) {
    let dir = temp_dir("wal-crash");
    let mut e = Engine::start_in(&dir, mode_flags, &[]);
    let threads = 4;
    let mut acked = vec![Acked::default(); threads];
    for round in 0..rounds {
        let pid = e.child.id() as i32;
        let after = Duration::from_millis(30 + fastrand::u64(..250));
        // SAFETY: kill(2) on the pid of the engine this test started (the closure runs once).
        acked = load_until_killed(e.port, threads, &acked, round, after, || unsafe {
            libc::kill(pid, libc::SIGKILL);
        });
        e.restart(mode_flags);
        let mut c = e.client();
        check(&mut c, &acked);
        after_restart(&mut c, round);
    }
    let total: usize = acked.iter().map(|a| a.sets.len()).sum();
    assert!(total > rounds * 20, "the rounds wrote something ({total} acknowledged SETs)");
}

/// BGSAVE under writes takes one instant and the log's position then, without stopping the
/// writes for the whole image (each shard is read before its first change after the instant):
/// killed after background saves made while four writers ran, the engine comes back from the
/// image plus the log after it with every acknowledged write exactly once — a counter or a
/// list whose change were both in the image and replayed from the log would be ahead.
#[test]
fn background_saves_under_writes_are_one_instant_of_the_log() {
    let dir = temp_dir("wal-bgsave");
    let flags = ["--wal", "always"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    let mut pipe = redis::pipe();
    for i in 0..50_000 {
        pipe.cmd("SET").arg(format!("bulk:{i}")).arg(format!("a value of some length, number {i}")).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let pid = e.child.id() as i32;
    let acked = load_until_killed(e.port, 4, &vec![Acked::default(); 4], 0, Duration::from_millis(50), || {
        for _ in 0..3 {
            let saves = info_field(&mut c, "persistence", "rdb_saves");
            assert_eq!(q::<String>(&mut c, &["BGSAVE"]), "Background saving started");
            eventually(30, "the background save ends", || info_field(&mut c, "persistence", "rdb_saves") > saves);
            std::thread::sleep(Duration::from_millis(30));
        }
        // SAFETY: kill(2) on the pid of the engine this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    e.restart(&flags);
    let mut c = e.client();
    let recovered = info_field(&mut c, "wal", "wal_recovered_records");
    let written: usize = 50_000 + acked.iter().map(|a| a.sets.len() * 3).sum::<usize>();
    assert!((recovered as usize) < written, "the image, not the whole log, brought the keys back ({recovered} records replayed)");
    check(&mut c, &acked);
    assert_eq!(q::<String>(&mut c, &["GET", "bulk:49999"]), "a value of some length, number 49999");
    assert!(acked.iter().all(|a| a.counter > 0), "every writer wrote during the saves");
}

#[test]
fn wal_always_loses_no_acknowledged_write_across_kills() {
    crash_rounds(&["--wal", "always"], 12);
}

#[test]
fn wal_pmem_loses_no_acknowledged_write_across_kills() {
    // A ring on a disk file is persisted by msync.
    let ring = temp_dir("wal-ring").join("ring");
    let flags = ["--wal", "pmem", "--wal-ring-path", ring.to_str().unwrap(), "--wal-ring-size", "1mb"];
    crash_rounds_then(&flags, 12, |c, _| assert!(info_wal(c).contains("wal_ring_persistence:msync\r\n"), "{}", info_wal(c)));
}

/// A ring in memory (tmpfs, standing in for PMem) is persisted by writing back its cache
/// lines, no system call: still nothing acknowledged is lost when the engine is killed.
#[test]
fn wal_pmem_ring_in_memory_loses_no_acknowledged_write_across_kills() {
    let ring = std::path::Path::new("/dev/shm").join(format!("terrace-test-ring-{}", std::process::id()));
    let _ = std::fs::remove_file(&ring);
    let flags = ["--wal", "pmem", "--wal-ring-path", ring.to_str().unwrap(), "--wal-ring-size", "1mb"];
    crash_rounds_then(&flags, 8, |c, _| assert!(info_wal(c).contains("wal_ring_persistence:cache-lines\r\n"), "{}", info_wal(c)));
    std::fs::remove_file(&ring).unwrap();
}

/// Write-back tenants: acknowledged from the cache and the WAL, flushed to storage later —
/// killed at random points (with snapshots, which must keep unflushed keys dirty, between
/// some rounds), nothing acknowledged is lost. (That storage gets it all is shown against
/// PostgreSQL in storage_e2e.rs.)
#[test]
fn write_back_loses_no_acknowledged_write_across_kills() {
    let flags = ["--wal", "always", "--storage", "lsm", "--storage-mode", "write-back", "--flush-interval-ms", "50"];
    crash_rounds_then(&flags, 8, |c, round| {
        if round % 2 == 0 {
            let _: () = q(c, &["SAVE"]);
        }
    });
}

/// Write-back after-images stop holding the log once storage has them: with small segments,
/// the log is pruned without any snapshot, and a killed engine still has everything (flushed
/// data from storage, the rest from what is left of the log; a cache tenant's writes too).
#[test]
fn write_back_records_are_pruned_once_storage_has_them() {
    let dir = temp_dir("wal-prune");
    let flags = ["--wal", "always", "--wal-segment-size", "64kb", "--storage", "lsm", "--storage-mode", "write-back", "--flush-interval-ms", "20"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    let mut scratch = e.client();
    let _: () = q(&mut scratch, &["TERRACE.NAMESPACE", "scratch", "STORAGE-MODE", "cache"]);
    let value = "w".repeat(500);
    for round in 0..20 {
        let mut p = redis::pipe();
        for i in 0..200 {
            p.cmd("SET").arg(format!("k{}", (round * 200 + i) % 3000)).arg(format!("{round}:{value}")).ignore();
        }
        p.query::<()>(&mut c).unwrap();
    }
    let mut pruned = 0;
    for _ in 0..100 {
        pruned = info_field(&mut c, "wal", "wal_pruned_through");
        if pruned > 2000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(pruned > 2000, "obsolete segments were deleted: pruned through {pruned}");
    let segments = std::fs::read_dir(dir.join("wal")).unwrap().filter(|f| f.as_ref().unwrap().path().extension().is_some_and(|x| x == "log")).count();
    assert!(segments < 20, "{segments} segments left");
    // A cache tenant's write holds the log from here on (only a snapshot covers it).
    let _: () = q(&mut scratch, &["SET", "kept", "by the log"]);
    let _: () = q(&mut c, &["SET", "last", "unflushed, maybe"]);
    drop((c, scratch));
    e.restart(&flags);
    let mut c = e.client();
    for i in (0..3000).step_by(7) {
        let got: String = q(&mut c, &["GET", &format!("k{i}")]);
        // Key i was last written in the last round whose range covered it.
        let last_round = (0..20).rev().find(|r| (r * 200..r * 200 + 200).any(|j| j % 3000 == i)).unwrap();
        assert!(got.starts_with(&format!("{last_round}:")), "k{i}: {}", &got[..8.min(got.len())]);
    }
    assert_eq!(q::<String>(&mut c, &["GET", "last"]), "unflushed, maybe");
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "scratch", "STORAGE-MODE", "cache"]);
    assert_eq!(q::<String>(&mut c, &["GET", "kept"]), "by the log");
}

fn info_wal(c: &mut redis::Connection) -> String {
    q(c, &["INFO", "wal"])
}

#[test]
fn torn_tails_are_cut_and_reported_and_the_log_goes_on() {
    let dir = temp_dir("wal-torn");
    let flags = ["--wal", "always"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    for i in 0..100 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    drop(c);
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe { libc::kill(e.child.id() as i32, libc::SIGKILL) };
    let _ = e.child.wait();
    // A batch cut short by the crash: half a header of garbage after the last good batch.
    let seg = std::fs::read_dir(dir.join("wal")).unwrap().map(|d| d.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "log")).unwrap();
    let good = std::fs::metadata(&seg).unwrap().len();
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, b"TWB1\x40\x00\x00\x00\x65\x00").unwrap();
    drop(f);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_terrace"));
    cmd.args(["engine", "--port", "0", "--data-dir"]).arg(&dir).args(flags).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let port = common::ready_port(&mut child);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    for i in 0..100 {
        assert_eq!(q::<String>(&mut c, &["GET", &format!("k{i}")]), format!("v{i}"));
    }
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), good, "the torn batch was cut off");
    assert!(info_wal(&mut c).contains("wal_recovered_records:100"));
    let _: () = q(&mut c, &["SET", "after", "torn"]);
    drop(c);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("torn or corrupt batch") && log.contains("10 bytes"), "{log}");
    let e2 = Engine::start_in(&dir, &flags, &[]);
    let mut c = e2.client();
    assert_eq!(q::<String>(&mut c, &["GET", "after"]), "torn");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 101);
    std::mem::forget(e); // its process is gone; e2 owns the directory now
}

#[test]
fn save_is_a_checkpoint_and_file_mode_survives_a_clean_stop() {
    let dir = temp_dir("wal-ckpt");
    let flags = ["--wal", "file"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    for i in 0..50 {
        let _: i64 = q(&mut c, &["INCR", "n"]);
        let _: () = q(&mut c, &["SET", &format!("a{i}"), "x"]);
    }
    let before = info_field(&mut c, "wal", "wal_last_seq");
    let _: () = q(&mut c, &["SAVE"]);
    let _: i64 = q(&mut c, &["INCR", "n"]);
    let _: i64 = q(&mut c, &["SADD", "s", "a", "b", "c"]);
    let popped: String = q(&mut c, &["SPOP", "s"]);
    std::thread::sleep(Duration::from_millis(200));
    let segs: Vec<String> = std::fs::read_dir(dir.join("wal")).unwrap().map(|d| d.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(segs, vec![format!("{before:020}.log")], "older segments are gone after SAVE");
    drop(c);
    e.restart_clean(&flags);
    let mut c = e.client();
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 51, "the snapshot plus the log after it, once each");
    let members: Vec<String> = q(&mut c, &["SMEMBERS", "s"]);
    assert_eq!(members.len(), 2);
    assert!(!members.contains(&popped), "SPOP is logged as the SREM it did");
    assert!(info_wal(&mut c).contains("wal_recovered_records:3"));
}

#[test]
fn a_snapshot_the_log_cannot_continue_is_a_clear_error() {
    let dir = temp_dir("wal-mismatch");
    let mut e = Engine::start_in(&dir, &["--wal", "always"], &[]);
    let mut c = e.client();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    drop(c);
    e.restart(&[]); // without the WAL: its SAVE has no WAL position
    let mut c = e.client();
    let _: () = q(&mut c, &["SET", "k2", "v2"]);
    let _: () = q(&mut c, &["SAVE"]);
    drop(c);
    e.stop();
    let out = Command::new(env!("CARGO_BIN_EXE_terrace"))
        .args(["engine", "--port", "0", "--wal", "always", "--data-dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("dump.rdb") && msg.contains("no WAL position") && msg.contains("wal"), "{msg}");
    let out = Command::new(env!("CARGO_BIN_EXE_terrace")).args(["engine", "--port", "0", "--wal", "sometimes"]).stderr(Stdio::piped()).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("`wal`"));
}

#[test]
fn tenants_keep_their_namespaces_through_replay() {
    let dir = temp_dir("wal-ns");
    let flags = ["--wal", "always"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "zeta"]);
    let _: () = q(&mut c, &["SET", "k", "zeta's"]);
    let mut d = e.client();
    let _: () = q(&mut d, &["TERRACE.NAMESPACE", "alpha"]);
    let _: () = q(&mut d, &["SET", "k", "alpha's"]);
    drop((c, d));
    e.restart(&flags);
    // After the crash, tenants come back in another order: each must still see its own key.
    let mut d = e.client();
    let _: () = q(&mut d, &["TERRACE.NAMESPACE", "alpha"]);
    assert_eq!(q::<String>(&mut d, &["GET", "k"]), "alpha's");
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "zeta"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "zeta's");
}

#[test]
fn a_tenant_with_its_wal_off_is_not_logged() {
    let dir = temp_dir("wal-tenant-off");
    let flags = ["--wal", "always"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut durable = e.client();
    let _: () = q(&mut durable, &["TERRACE.NAMESPACE", "durable"]);
    let mut volatile = e.client();
    let _: () = q(&mut volatile, &["TERRACE.NAMESPACE", "volatile", "WAL", "off"]);
    let before = info_field(&mut durable, "wal", "wal_last_seq");
    for i in 0..20 {
        let _: () = q(&mut durable, &["SET", &format!("d{i}"), "x"]);
        let _: () = q(&mut volatile, &["SET", &format!("v{i}"), "x"]);
    }
    assert_eq!(info_field(&mut durable, "wal", "wal_last_seq"), before + 20, "only the durable tenant's writes were logged");
    assert!(common::err(&mut volatile, &["TERRACE.NAMESPACE", "volatile", "WAL", "maybe"]).contains("WAL must be engine or off"));
    drop((durable, volatile));
    e.restart(&flags); // SIGKILL
    let mut c = e.client();
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "durable"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 20);
    let _: () = q(&mut c, &["TERRACE.NAMESPACE", "volatile"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0, "a cache tenant starts empty after a crash");
}

/// A transaction mixing a write with a command that visits every shard (TERRACE.WORKLOAD
/// takes a census) answers both, and its write is in the log: it survives a SIGKILL.
#[test]
fn exec_with_a_census_command_answers_and_logs_its_writes() {
    let mut e = Engine::start(&["--wal", "always"]);
    let mut c = e.client();
    let replies: Vec<redis::Value> =
        redis::pipe().atomic().cmd("SET").arg("a").arg("1").cmd("TERRACE.WORKLOAD").arg("default").query(&mut c).expect("EXEC answers");
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0], redis::Value::Okay);
    let redis::Value::BulkString(doc) = &replies[1] else { panic!("TERRACE.WORKLOAD inside EXEC: {:?}", replies[1]) };
    let doc: serde_json::Value = serde_json::from_slice(doc).unwrap();
    assert_eq!(doc["keys"], 1, "the census inside EXEC sees the SET before it: {doc}");
    // Other clients see the write; the connection is still listed and alive.
    assert_eq!(q::<String>(&mut e.client(), &["GET", "a"]), "1");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    e.restart(&["--wal", "always"]);
    assert_eq!(q::<String>(&mut e.client(), &["GET", "a"]), "1", "the SET inside EXEC was logged");
}

/// Save points, as Redis's: a snapshot in the background once enough changes are old
/// enough (INFO counts them), one on a clean stop — so a restart after SAVE, more writes
/// and a clean stop loads the newest state, never the older snapshot — and none with
/// SHUTDOWN NOSAVE.
#[test]
fn save_points_snapshot_in_the_background_and_on_a_clean_stop() {
    let dir = temp_dir("save-points");
    let flags = ["--save", "1 3"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "save"]), ["save", "1 3"]);
    let _: () = q(&mut c, &["SET", "a", "1"]);
    let _: () = q(&mut c, &["SET", "b", "1"]);
    assert_eq!(info_field(&mut c, "persistence", "rdb_changes_since_last_save"), 2);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!dir.join("dump.rdb").exists(), "two changes are below the save point");
    let _: () = q(&mut c, &["SET", "c", "1"]);
    eventually(10, "the save point's snapshot", || dir.join("dump.rdb").exists() && info_field(&mut c, "persistence", "rdb_changes_since_last_save") == 0);
    // SAVE by hand, then newer writes: a clean stop saves them.
    let _: () = q(&mut c, &["SAVE"]);
    let _: () = q(&mut c, &["SET", "a", "2"]);
    let _: i64 = q(&mut c, &["DEL", "b"]);
    drop(c);
    e.restart_clean(&flags);
    let mut c = e.client();
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "a"]).as_deref(), Some("2"), "the newest value, not the SAVE's");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "b"]), None, "deleted after the SAVE: stays deleted");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    // SHUTDOWN NOSAVE leaves the last snapshot as it was.
    let _: () = q(&mut c, &["SET", "late", "1"]);
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    let start = std::time::Instant::now();
    while e.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "SHUTDOWN NOSAVE ends the engine");
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = Engine::start_in(&dir, &flags, &[]);
    assert_eq!(q::<Option<String>>(&mut e.client(), &["GET", "late"]), None, "NOSAVE: not saved");
    // A save point that is not one is refused, naming the key.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_terrace")).args(["engine", "--port", "0", "--save", "60"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("save"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A tenant's namespace dropped (`TERRACE.DROPNAMESPACE`, the console's tenant delete) is
/// emptied, its clients disconnected, and its number — with none of its keys, limits,
/// compression, scripts or functions — goes to the next new tenant; after a crash the WAL's
/// replay drops what was logged before the drop, whoever took the number after it. (Before,
/// a deleted tenant's namespace stayed until a restart: an engine of 3 namespaces refused a
/// third tenant after one was deleted.)
#[test]
fn a_dropped_namespace_is_emptied_reset_and_its_number_reused_through_replay() {
    let dir = temp_dir("wal-drop-ns");
    let flags = ["--wal", "always"];
    let env = [("TERRACE_NAMESPACES", "3")];
    let mut e = Engine::start_in(&dir, &flags, &env);
    let mut admin = e.client();
    let mut shop = e.client();
    let _: () = q(&mut shop, &["TERRACE.NAMESPACE", "shop", "COMPRESSION", "zstd"]);
    for db in ["0", "3"] {
        let _: () = q(&mut shop, &["SELECT", db]);
        let _: () = q(&mut shop, &["SET", "k", "shop's"]);
    }
    let sha: String = q(&mut shop, &["SCRIPT", "LOAD", "return 1"]);
    let _: String = q(&mut shop, &["FUNCTION", "LOAD", "#!lua name=shoplib\nredis.register_function('f', function() return 1 end)"]);
    let _: () = q(&mut shop, &["TERRACE.NAMESPACE", "shop", "MAXMEMORY", "1"]);
    // (Tenants' usage is measured by the cron, a tick later.)
    eventually(10, "the tenant's limit refuses writes", || {
        redis::cmd("SET").arg("k2").arg("v").query::<()>(&mut shop).is_err_and(|e| e.to_string().contains("OOM"))
    });
    let mut blog = e.client();
    let _: () = q(&mut blog, &["TERRACE.NAMESPACE", "blog"]);
    let _: () = q(&mut blog, &["SET", "k", "blog's"]);
    assert!(common::err(&mut admin, &["TERRACE.NAMESPACE", "third"]).contains("at most 3 namespaces"));
    assert!(common::err(&mut admin, &["TERRACE.DROPNAMESPACE", "default"]).contains("cannot be dropped"));
    assert!(common::err(&mut shop, &["TERRACE.DROPNAMESPACE", "shop"]).contains("this connection is in"));

    assert_eq!(q::<i64>(&mut admin, &["TERRACE.DROPNAMESPACE", "shop"]), 1);
    assert_eq!(q::<i64>(&mut admin, &["TERRACE.DROPNAMESPACE", "shop"]), 0, "already dropped");
    assert!(redis::cmd("PING").query::<String>(&mut shop).is_err(), "the dropped tenant's client is disconnected");
    assert_eq!(q::<Vec<String>>(&mut admin, &["TERRACE.NAMESPACES"]), ["blog"]);

    // The third tenant takes shop's number, with nothing of shop's.
    let mut third = e.client();
    let _: () = q(&mut third, &["TERRACE.NAMESPACE", "third"]);
    assert_eq!(q::<Vec<String>>(&mut admin, &["TERRACE.NAMESPACES"]), ["third", "blog"], "shop's place");
    for db in ["3", "0"] {
        let _: () = q(&mut third, &["SELECT", db]);
        assert_eq!(q::<i64>(&mut third, &["DBSIZE"]), 0, "db {db} is empty");
    }
    let _: () = q(&mut third, &["SET", "n", "third's"]);
    assert_eq!(q::<Vec<i64>>(&mut third, &["SCRIPT", "EXISTS", &sha]), [0], "no script of shop's");
    assert_eq!(q::<Vec<redis::Value>>(&mut third, &["FUNCTION", "LIST"]), Vec::<redis::Value>::new(), "no function of shop's");
    let stats: serde_json::Value = serde_json::from_str(&q::<String>(&mut admin, &["TERRACE.COMPRESSION", "STATS", "third"])).unwrap();
    assert_eq!(stats["settings"]["compression"], "none", "not shop's codec: {stats}");
    assert_eq!(q::<String>(&mut blog, &["GET", "k"]), "blog's", "the other tenant keeps its keys");

    // A crash: the log holds shop's writes, its drop and third's writes, all under one number.
    drop((admin, blog, third));
    let _ = e.child.kill();
    let _ = e.child.wait();
    let e2 = Engine::start_in(&dir, &flags, &env);
    std::mem::forget(std::mem::replace(&mut e, e2));
    let mut third = e.client();
    let _: () = q(&mut third, &["TERRACE.NAMESPACE", "third"]);
    assert_eq!(q::<Vec<String>>(&mut third, &["KEYS", "*"]), ["n"], "only third's key after the replay");
    let _: () = q(&mut third, &["SELECT", "3"]);
    assert_eq!(q::<i64>(&mut third, &["DBSIZE"]), 0, "shop's key of db 3 stays dropped");
    let mut shop = e.client();
    let _: () = q(&mut shop, &["TERRACE.NAMESPACE", "blog"]);
    assert_eq!(q::<String>(&mut shop, &["GET", "k"]), "blog's");
    assert_eq!(q::<Vec<String>>(&mut shop, &["TERRACE.NAMESPACES"]), ["third", "blog"]);
}

/// Issue 46, finding 1: an engine restarted fenced (`--wait-for-role`, as `terrace up
/// --replicas` restarts a primary) replays its log all the same — it refused every record as
/// if it were a client's before — and serves every acknowledged write once it is told it is a
/// primary again.
#[test]
fn a_fenced_restart_replays_its_log() {
    let dir = temp_dir("wal-fenced");
    let flags = ["--wal", "always"];
    let mut e = Engine::start_in(&dir, &flags, &[]);
    let mut c = e.client();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(format!("v{i}")).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let _: i64 = q(&mut c, &["INCRBY", "n", "7"]);
    drop(c);
    e.restart(&["--wal", "always", "--wait-for-role"]);
    let mut c = e.client();
    assert!(common::err(&mut c, &["GET", "k1"]).contains("waits for its role"), "fenced until it has a role: {}", common::err(&mut c, &["GET", "k1"]));
    assert!(info_wal(&mut c).contains("wal_recovered_records:1001"), "{}", info_wal(&mut c));
    let _: () = q(&mut c, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1001);
    assert_eq!(q::<String>(&mut c, &["GET", "k999"]), "v999");
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 7);
}

/// Issue 46, finding 1 (resurrection): a former primary that became a replica (a full sync
/// from the new primary) and then crashed must come back with the new primary's state — never
/// with its own superseded log replayed over it, which brought back keys the new primary had
/// deleted or overwritten.
#[test]
fn a_full_sync_becomes_the_logs_base_and_nothing_superseded_comes_back() {
    let dir = temp_dir("wal-rebase");
    let flags = ["--wal", "always"];
    let mut old = Engine::start_in(&dir, &flags, &[]);
    let mut c = old.client();
    for i in 0..100 {
        let _: () = q(&mut c, &["SET", &format!("gone{i}"), "the old primary's"]);
    }
    let _: () = q(&mut c, &["SET", "shared", "old"]);
    drop(c);
    // The new primary has moved on: it never had the `gone` keys, and `shared` is newer.
    let new = Engine::start(&flags);
    let mut p = new.client();
    let _: () = q(&mut p, &["SET", "shared", "new"]);
    let _: () = q(&mut p, &["SET", "only-new", "1"]);
    old.restart(&["--wal", "always", "--wait-for-role"]);
    let mut r = old.client();
    let _: () = q(&mut r, &["REPLICAOF", "127.0.0.1", &new.port.to_string()]);
    eventually(20, "the replica synced", || redis::cmd("GET").arg("shared").query::<Option<String>>(&mut r).ok().flatten().as_deref() == Some("new"));
    let _: () = q(&mut p, &["SET", "after-sync", "streamed"]);
    eventually(20, "the stream reached the replica", || redis::cmd("EXISTS").arg("after-sync").query::<i64>(&mut r).ok() == Some(1));
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]), 3);
    // (A replica logs its master's stream without waiting for the disk: the crash comes once
    // its log holds what it applied.)
    eventually(10, "the replica's log is durable", || info_field(&mut r, "wal", "wal_durable_seq") >= info_field(&mut r, "wal", "wal_last_seq"));
    drop(r);
    // A crash, and a plain restart (no role waited for): the image and what followed it.
    old.restart(&flags);
    let mut r = old.client();
    assert_eq!(q::<Option<String>>(&mut r, &["GET", "gone0"]), None, "a superseded write came back");
    assert_eq!(q::<String>(&mut r, &["GET", "shared"]), "new", "a superseded write came back over a newer one");
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]), 3, "the new primary's keys, and what its stream brought");
}

/// A small tmpfs of the test's own (CI runs as root), unmounted when dropped: a disk that
/// can be filled.
struct SmallDisk {
    path: std::path::PathBuf,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> SmallDisk {
        let path = temp_dir("small-disk");
        let status = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"]).arg(&path).status();
        assert!(status.is_ok_and(|s| s.success()), "mount a tmpfs at {} (the test runs as root, as CI does)", path.display());
        SmallDisk { path }
    }

    /// Writes a file until the disk has no room left.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.path.join("filler")).unwrap();
        let block = vec![0u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("--lazy").arg(&self.path).status();
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Issue 46: a replica acknowledged the offset it had applied, not what its log had made
/// durable, so with `wal = always` a write its master's WAIT counted on it could be lost
/// when both crashed. A replica acknowledges its stream only once it is durable in its own
/// log: one whose log cannot write (its disk full) acknowledges nothing, and WAIT says so.
#[test]
fn a_replica_acknowledges_only_what_its_log_made_durable() {
    let disk = SmallDisk::mount(16);
    let flags = ["--wal", "always"];
    let primary = Engine::start(&flags);
    let replica = Engine::start_in(&disk.path.join("replica"), &flags, &[]);
    let (mut p, mut r) = (primary.client(), replica.client());
    let _: () = q(&mut r, &["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
    eventually(20, "the replica follows", || common::info_text(&mut r, "replication", "master_link_status") == "up");
    let _: () = q(&mut p, &["SET", "before", "1"]);
    assert_eq!(q::<i64>(&mut p, &["WAIT", "1", "5000"]), 1, "a replica whose log writes acknowledges");

    disk.fill();
    // (Larger than a page: it needs room the disk no longer has.)
    let _: () = q(&mut p, &["SET", "after", &"x".repeat(256 << 10)]);
    assert_eq!(q::<i64>(&mut p, &["WAIT", "1", "2000"]), 0, "a replica acknowledged a write its log could not keep");
    eventually(10, "the replica says why", || common::info_text(&mut r, "wal", "wal_poisoned").contains("WAL write failed"));
    drop((p, r, primary, replica));
    drop(disk);
}
