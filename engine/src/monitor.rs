//! MONITOR: clients that see every command the server runs, one line each, as Redis prints
//! them (`+<unix time> [<db> <client address>] "arg" ...`). Lines go through the same
//! per-client mailbox as pub/sub messages.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::clients::ClientInfo;
use crate::clock::now_us;

#[derive(Default)]
pub struct Monitors {
    clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    count: AtomicUsize,
}

/// Quotes an argument as Redis's `sdscatrepr` does.
fn repr(out: &mut String, arg: &[u8]) {
    out.push('"');
    for &b in arg {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
}

/// Whether an argument must be hidden from MONITOR and the slow log, as Redis hides them:
/// AUTH's, the credentials HELLO AUTH carries, a password CONFIG SET gives (requirepass,
/// masterauth), ACL SETUSER's user and rules, and a slot move's target password (TERRACE.MIGRATE's
/// AUTH).
pub fn redacted(argv: &[&[u8]], i: usize) -> bool {
    let name = argv[0];
    let is = |j: usize, word: &str| argv.get(j).is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()));
    if name.eq_ignore_ascii_case(b"auth") {
        return i >= 1;
    }
    if name.eq_ignore_ascii_case(b"hello") {
        return (2..i).any(|j| is(j, "auth") && i <= j + 2);
    }
    if name.eq_ignore_ascii_case(b"config") && is(1, "set") {
        return i >= 3 && i % 2 == 1 && (is(i - 1, "requirepass") || is(i - 1, "masterauth"));
    }
    if name.eq_ignore_ascii_case(b"acl") && is(1, "setuser") {
        return i >= 2;
    }
    if name.eq_ignore_ascii_case(b"terrace.migrate") {
        return i >= 4 && is(i - 1, "auth");
    }
    false
}

impl Monitors {
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    pub fn add(&self, c: &Arc<ClientInfo>) {
        if self.clients.lock().insert(c.id, c.clone()).is_none() {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn remove(&self, id: u64) {
        if self.clients.lock().remove(&id).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Sends one command to every monitor; `origin` is the client's address or "lua".
    pub fn feed(&self, db: usize, origin: &str, argv: &[&[u8]]) {
        let us = now_us();
        let mut line = format!("{}.{:06} [{db} {origin}]", us / 1_000_000, us % 1_000_000);
        for (i, a) in argv.iter().enumerate() {
            line.push(' ');
            if redacted(argv, i) {
                line.push_str("\"(redacted)\"");
            } else {
                repr(&mut line, a);
            }
        }
        let targets: Vec<Arc<ClientInfo>> = self.clients.lock().values().cloned().collect();
        for c in targets {
            crate::pubsub::deliver(&c, |w| w.simple(&line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_redaction() {
        let mut s = String::new();
        repr(&mut s, b"a \"b\"\n\x01\\");
        assert_eq!(s, r#""a \"b\"\n\x01\\""#);
        let argv: [&[u8]; 5] = [b"HELLO", b"3", b"AUTH", b"user", b"pass"];
        assert!(!redacted(&argv, 2) && redacted(&argv, 3) && redacted(&argv, 4));
        assert!(redacted(&[b"auth", b"pw"], 1));
        let config: [&[u8]; 6] = [b"CONFIG", b"SET", b"maxmemory", b"1mb", b"masterauth", b"pw"];
        assert!(!redacted(&config, 3) && !redacted(&config, 4) && redacted(&config, 5));
        let migrate: [&[u8]; 7] = [b"TERRACE.MIGRATE", b"START", b"j", b"h:1", b"0-9", b"AUTH", b"pw"];
        assert!(!redacted(&migrate, 4) && !redacted(&migrate, 5) && redacted(&migrate, 6));
        assert!(redacted(&[b"ACL", b"SETUSER", b"u", b">pw"], 3) && redacted(&[b"ACL", b"SETUSER", b"u", b">pw"], 2));
        assert!(!redacted(&[b"ACL", b"SETUSER", b"u", b">pw"], 1));
    }
}
