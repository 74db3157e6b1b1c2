//! What replicas are sent for a write: the command as the engine logged it (`Effects`'
//! records: the leaf writes of a transaction or script, SPOP as SREM, XADD with the ID it
//! made) with its relative times made absolute, as Redis 7 propagates them — a replica that
//! runs it later, or after a failover, gives the key the same expiry time. A commit's
//! records go as one MULTI/EXEC when there are several, or when one is a blocking command
//! (inside MULTI it cannot block: it takes what is there, as it did on the master).

use smallvec::SmallVec;

use super::Stream;

fn is(a: &[u8], name: &str) -> bool {
    a.eq_ignore_ascii_case(name.as_bytes())
}

fn int(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// An absolute unix time in ms for `amount` of `unit` (1000: seconds, 1: ms) after `now`
/// (`relative`) or since the epoch.
fn absolute_ms(now: i64, amount: &[u8], unit: i64, relative: bool) -> Option<Vec<u8>> {
    let ms = int(amount)?.checked_mul(unit)?;
    let at = if relative { ms.checked_add(now)? } else { ms };
    Some(at.to_string().into_bytes())
}

/// Whether a command may block (it is sent inside MULTI, where it does not).
pub fn is_blocking(name: &[u8]) -> bool {
    const BLOCKING: [&str; 9] = ["BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "XREADGROUP"];
    BLOCKING.iter().any(|b| is(name, b))
}

/// Whether a record may have a relative time or be something else replicas get in another
/// form; most writes (SET k v, INCR, HSET…) do not, and are sent without a copy.
fn may_need_rewriting(argv: &[&[u8]]) -> bool {
    const NAMES: [&str; 9] = ["EXPIRE", "PEXPIRE", "EXPIREAT", "SETEX", "PSETEX", "GETEX", "GETDEL", "RESTORE", "SET"];
    let name = argv[0];
    NAMES.iter().any(|n| is(name, n)) && !(argv.len() == 3 && is(name, "SET"))
}

/// What replicas run for a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Rewritten {
    /// The command as it ran.
    Same,
    /// This command instead.
    As(Vec<Vec<u8>>),
    /// Nothing: it changed nothing a replica has (GETEX without options).
    Nothing,
}

/// What replicas run for record `argv` (run at `now`).
pub fn rewrite(now: i64, argv: &[&[u8]]) -> Rewritten {
    if !may_need_rewriting(argv) {
        return Rewritten::Same;
    }
    match rewritten(now, argv) {
        None => Rewritten::Nothing,
        Some(new) if new.len() == argv.len() && new.iter().zip(argv).all(|(a, b)| a == b) => Rewritten::Same,
        Some(new) => Rewritten::As(new),
    }
}

fn rewritten(now: i64, argv: &[&[u8]]) -> Option<Vec<Vec<u8>>> {
    let owned = |args: &[&[u8]]| args.iter().map(|a| a.to_vec()).collect::<Vec<_>>();
    let name = argv[0];
    let unchanged = || Some(owned(argv));
    match argv.len() {
        3.. if is(name, "EXPIRE") || is(name, "PEXPIRE") || is(name, "EXPIREAT") => {
            let (unit, relative) = if is(name, "EXPIRE") {
                (1000, true)
            } else if is(name, "PEXPIRE") {
                (1, true)
            } else {
                (1000, false)
            };
            let Some(at) = absolute_ms(now, argv[2], unit, relative) else { return unchanged() };
            let mut out = vec![b"PEXPIREAT".to_vec(), argv[1].to_vec(), at];
            out.extend(owned(&argv[3..]));
            Some(out)
        }
        4 if is(name, "SETEX") || is(name, "PSETEX") => {
            let unit = if is(name, "SETEX") { 1000 } else { 1 };
            let Some(at) = absolute_ms(now, argv[2], unit, true) else { return unchanged() };
            Some(vec![b"SET".to_vec(), argv[1].to_vec(), argv[3].to_vec(), b"PXAT".to_vec(), at])
        }
        4.. if is(name, "SET") => {
            let mut out = owned(&argv[..3]);
            let mut i = 3;
            while i < argv.len() {
                let opt = argv[i];
                let unit = if is(opt, "EX") || is(opt, "EXAT") { 1000 } else { 1 };
                if (is(opt, "EX") || is(opt, "PX") || is(opt, "EXAT")) && i + 1 < argv.len() {
                    let Some(at) = absolute_ms(now, argv[i + 1], unit, !is(opt, "EXAT")) else { return unchanged() };
                    out.push(b"PXAT".to_vec());
                    out.push(at);
                    i += 2;
                } else {
                    out.push(opt.to_vec());
                    i += 1;
                }
            }
            Some(out)
        }
        2.. if is(name, "GETEX") => {
            let key = argv[1].to_vec();
            match argv.get(2) {
                None => None,
                Some(opt) if is(opt, "PERSIST") => Some(vec![b"PERSIST".to_vec(), key]),
                Some(opt) => {
                    let (unit, relative) = if is(opt, "EX") {
                        (1000, true)
                    } else if is(opt, "PX") {
                        (1, true)
                    } else if is(opt, "EXAT") {
                        (1000, false)
                    } else {
                        (1, false)
                    };
                    let at = argv.get(3).and_then(|a| absolute_ms(now, a, unit, relative));
                    at.map(|at| vec![b"PEXPIREAT".to_vec(), key, at])
                }
            }
        }
        2 if is(name, "GETDEL") => Some(vec![b"DEL".to_vec(), argv[1].to_vec()]),
        4.. if is(name, "RESTORE") => {
            let absttl = argv[4..].iter().any(|a| is(a, "ABSTTL"));
            if absttl || int(argv[2]).is_none_or(|ttl| ttl <= 0) {
                return unchanged();
            }
            let Some(at) = absolute_ms(now, argv[2], 1, true) else { return unchanged() };
            let mut out = owned(argv);
            out[2] = at;
            out.push(b"ABSTTL".to_vec());
            Some(out)
        }
        _ => unchanged(),
    }
}

/// A record as replicas run it: as it ran (its arguments borrowed from the record) or
/// rewritten.
enum Command<'p> {
    Same(SmallVec<[&'p [u8]; 6]>),
    As(Vec<Vec<u8>>),
}

impl Command<'_> {
    fn name(&self) -> &[u8] {
        match self {
            Command::Same(argv) => argv[0],
            Command::As(argv) => &argv[0],
        }
    }
}

/// Adds one commit's records (`wal::frame`'s form) of the databases the stream `carries` to
/// it: in MULTI/EXEC when there are several or one may block. (The common commit, one
/// record as it ran, is sent without an allocation: its arguments stay borrowed.)
pub fn put_commit(stream: &mut Stream, payload: &[u8], count: u32, carries: &dyn Fn(usize) -> bool) {
    let mut commands: SmallVec<[(usize, Command); 1]> = SmallVec::new();
    crate::wal::frame::for_each_record(payload, count, |now, db, _, argv| {
        if carries(db) {
            match rewrite(now, argv) {
                Rewritten::Same => commands.push((db, Command::Same(argv.iter().copied().collect()))),
                Rewritten::As(new) => commands.push((db, Command::As(new))),
                Rewritten::Nothing => {}
            }
        }
    });
    let wrap = commands.len() > 1 || commands.iter().any(|(_, c)| is_blocking(c.name()));
    if wrap {
        // (Into the first command's namespace before MULTI: TERRACE.NAMESPACE cannot be queued.)
        if !stream.select(commands[0].0) {
            return;
        }
        stream.word("MULTI");
    }
    for (db, c) in &commands {
        match c {
            Command::Same(argv) => stream.command(*db, argv),
            Command::As(argv) => stream.command(*db, argv),
        }
    }
    if wrap {
        stream.word("EXEC");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(argv: Option<Vec<Vec<u8>>>) -> Option<String> {
        argv.map(|a| a.iter().map(|w| String::from_utf8_lossy(w).into_owned()).collect::<Vec<_>>().join(" "))
    }

    fn rw(now: i64, line: &str) -> Option<String> {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        words(rewritten(now, &argv))
    }

    #[test]
    fn relative_times_become_absolute() {
        let now = 1_000_000;
        assert_eq!(rw(now, "EXPIRE k 10").as_deref(), Some("PEXPIREAT k 1010000"));
        assert_eq!(rw(now, "pexpire k 10 NX").as_deref(), Some("PEXPIREAT k 1000010 NX"));
        assert_eq!(rw(now, "EXPIREAT k 5").as_deref(), Some("PEXPIREAT k 5000"));
        assert_eq!(rw(now, "PEXPIREAT k 5").as_deref(), Some("PEXPIREAT k 5"));
        assert_eq!(rw(now, "SETEX k 2 v").as_deref(), Some("SET k v PXAT 1002000"));
        assert_eq!(rw(now, "PSETEX k 2 v").as_deref(), Some("SET k v PXAT 1000002"));
        assert_eq!(rw(now, "SET k v NX EX 3 GET").as_deref(), Some("SET k v NX PXAT 1003000 GET"));
        assert_eq!(rw(now, "SET k v px 3").as_deref(), Some("SET k v PXAT 1000003"));
        assert_eq!(rw(now, "SET k v EXAT 3").as_deref(), Some("SET k v PXAT 3000"));
        assert_eq!(rw(now, "SET k v KEEPTTL").as_deref(), Some("SET k v KEEPTTL"));
        assert_eq!(rw(now, "GETEX k EX 1").as_deref(), Some("PEXPIREAT k 1001000"));
        assert_eq!(rw(now, "GETEX k PXAT 7").as_deref(), Some("PEXPIREAT k 7"));
        assert_eq!(rw(now, "GETEX k PERSIST").as_deref(), Some("PERSIST k"));
        assert_eq!(rw(now, "GETEX k"), None, "nothing for a replica");
        assert_eq!(rw(now, "GETDEL k").as_deref(), Some("DEL k"));
        assert_eq!(rw(now, "RESTORE k 50 payload REPLACE").as_deref(), Some("RESTORE k 1000050 payload REPLACE ABSTTL"));
        assert_eq!(rw(now, "RESTORE k 0 payload").as_deref(), Some("RESTORE k 0 payload"));
        assert_eq!(rw(now, "INCR k").as_deref(), Some("INCR k"));
        assert_eq!(rw(now, "EXPIRE k 99999999999999999").as_deref(), Some("EXPIRE k 99999999999999999"), "overflow: as it was");
    }

    fn stream_of(records: &[(usize, &str)]) -> String {
        let mut payload = Vec::new();
        for (ns_base, line) in records {
            let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            crate::wal::frame::put_record(&mut payload, 1000, *ns_base, *ns_base, &argv);
        }
        let b = super::super::Backlog::new(0, 1 << 20);
        b.append(None, |s| put_commit(s, &payload, records.len() as u32, &|db| db < 16));
        assert!(b.attach(1, 0));
        let super::super::backlog::Read::Bytes(bytes) = b.read(1, 1 << 20, std::time::Duration::ZERO) else { return String::new() };
        String::from_utf8(bytes).unwrap().split("\r\n").filter(|w| !w.starts_with(['*', '$'])).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn a_commit_goes_whole_and_only_the_default_namespace() {
        assert_eq!(stream_of(&[(0, "SET k v")]), "SELECT 0 SET k v ");
        assert_eq!(stream_of(&[(0, "SET k v EX 1")]), "SELECT 0 SET k v PXAT 2000 ");
        assert_eq!(stream_of(&[(0, "INCR a"), (0, "INCR b")]), "SELECT 0 MULTI INCR a INCR b EXEC ");
        assert_eq!(stream_of(&[(0, "BLPOP a b 0")]), "SELECT 0 MULTI BLPOP a b 0 EXEC ");
        assert_eq!(stream_of(&[(16, "SET k v")]), "", "a tenant's write");
        assert_eq!(stream_of(&[(16, "SET k v"), (0, "DEL k")]), "SELECT 0 DEL k ");
        assert_eq!(stream_of(&[(0, "GETEX k")]), "");
        assert_eq!(rewrite(0, &[b"INCR", b"k"]), Rewritten::Same);
    }

    #[test]
    fn blocking_commands_are_known() {
        assert!(is_blocking(b"blpop") && is_blocking(b"BZMPOP") && is_blocking(b"XREADGROUP"));
        assert!(!is_blocking(b"LPOP"));
    }
}
