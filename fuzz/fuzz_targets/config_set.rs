//! Fuzz target: CONFIG SET with arbitrary values for every Redis 7.0 parameter, through the
//! real command dispatcher. Any panic is a bug; so is a value CONFIG SET accepts that the
//! parameter table would refuse, a value CONFIG GET then shows other than the table's
//! canonical form of it, or a canonical form that does not validate to itself.

#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use terrace_commands::params::{self, PARAMS};
use terrace_engine::command::{self, Conn};
use terrace_engine::keyspace::LockCap;
use terrace_engine::server::state::{ClientInfo, Server};
use terrace_engine::EngineConfig;

/// The node, and the keyspace's lock capability the pipeline takes its locks with.
fn server() -> &'static (Arc<Server>, LockCap) {
    static SRV: OnceLock<(Arc<Server>, LockCap)> = OnceLock::new();
    SRV.get_or_init(|| Server::new(EngineConfig::default(), None, None))
}

/// Runs one command; its reply's raw bytes.
fn run(conn: &mut Conn, argv: &[&[u8]]) -> Vec<u8> {
    let mut out = BytesMut::new();
    let (srv, locks) = server();
    let _ = command::execute(srv, locks, conn, argv, &mut out);
    out.to_vec()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, value)) = data.split_first() else { return };
    let param = &PARAMS[pick as usize % PARAMS.len()];
    // Locking the default user out would make every later input NOAUTH.
    if param.name == "requirepass" {
        return;
    }
    let srv = &server().0;
    let info = Arc::new(ClientInfo::new(1, -1, "127.0.0.1:1".into(), "127.0.0.1:2".into(), 0, srv.limits.clone()));
    let mut conn = Conn::new(info, srv);
    let reply = run(&mut conn, &[b"CONFIG", b"SET", param.name.as_bytes(), value]);
    // The engine reads values as UTF-8 (lossily), as Redis's sds strings are compared.
    let text = String::from_utf8_lossy(value);
    let expected = params::validate(param, &text);
    if reply != b"+OK\r\n" {
        assert!(reply.starts_with(b"-ERR"), "{}: {:?}", param.name, String::from_utf8_lossy(&reply));
        return;
    }
    let canonical = expected.unwrap_or_else(|why| panic!("CONFIG SET {} {text:?} was accepted; the table refuses it: {why}", param.name));
    assert_eq!(params::validate(param, &canonical).as_deref(), Ok(canonical.as_str()), "{}: the canonical form must validate to itself", param.name);
    let got = run(&mut conn, &[b"CONFIG", b"GET", param.name.as_bytes()]);
    let got = String::from_utf8_lossy(&got);
    if param.name != "client-output-buffer-limit" {
        // (That one merges the classes given into the others.)
        assert!(got.ends_with(&format!("${}\r\n{canonical}\r\n", canonical.len())), "CONFIG GET {} after setting {canonical:?}: {got:?}", param.name);
    }
    // Back to the default, so later inputs start from a usable server (a 1-byte maxmemory…).
    let _ = run(&mut conn, &[b"CONFIG", b"SET", param.name.as_bytes(), param.default.as_bytes()]);
});
