//! Fuzz target: arbitrary bytes through the request parser (fed in chunks of varying size, so
//! resumption is exercised) and every parsed request through the real command dispatcher.
//! Any panic, hang or out-of-memory is a bug.
//!
//! Run with `-detect_leaks=0`: keyspace entries are packed byte-aligned, so the pointer from a
//! collection entry to its collection sits at an unaligned offset that LeakSanitizer does not
//! scan, and every collection still in the keyspace looks leaked.

#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::{Buf, BytesMut};
use libfuzzer_sys::fuzz_target;
use terrace_engine::command::{self, Conn};
use terrace_engine::keyspace::LockCap;
use terrace_engine::protocol::{Limits, RequestParser};
use terrace_engine::server::state::{ClientInfo, Server};
use terrace_engine::EngineConfig;

/// The node, and the keyspace's lock capability the pipeline takes its locks with.
fn server() -> &'static (Arc<Server>, LockCap) {
    static SRV: OnceLock<(Arc<Server>, LockCap)> = OnceLock::new();
    SRV.get_or_init(|| Server::new(EngineConfig::default(), None, None))
}

fn client() -> Arc<ClientInfo> {
    Arc::new(ClientInfo::new(1, -1, "127.0.0.1:1".into(), "127.0.0.1:2".into(), 0, server().0.limits.clone()))
}

fuzz_target!(|data: &[u8]| {
    let (srv, locks) = server();
    let mut conn = Conn::new(client(), srv);
    // Small limits keep single inputs from allocating gigabytes.
    let mut parser = RequestParser::new(Limits { max_bulk_len: 1 << 20, max_inline_len: 64 * 1024, max_args: 1 << 16 });
    let mut inbuf = BytesMut::new();
    let mut out = BytesMut::new();
    // The first byte picks the chunk size used to feed the rest.
    let (chunk, rest) = match data.split_first() {
        Some((c, r)) => ((*c as usize % 64) + 1, r),
        None => return,
    };
    'feed: for piece in rest.chunks(chunk) {
        inbuf.extend_from_slice(piece);
        loop {
            let req = match parser.parse(&inbuf) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(_) => break 'feed,
            };
            if !req.args.is_empty() {
                let argv: Vec<&[u8]> = (0..req.args.len()).map(|i| req.arg(&inbuf, i)).collect();
                // Commands that sleep or stop the process are not what this target explores, nor
                // locking the default user out (every later input would only get NOAUTH).
                let name = argv[0].to_ascii_lowercase();
                let locks_out = (name == b"acl" || name == b"config" || name == b"auth")
                    && argv.iter().any(|a| a.eq_ignore_ascii_case(b"default") || a.eq_ignore_ascii_case(b"requirepass"));
                if name != b"debug" && name != b"shutdown" && !locks_out {
                    let _ = command::execute(srv, locks, &mut conn, &argv, &mut out);
                    srv.blocking.unregister(1, conn.db, &[]);
                }
            }
            inbuf.advance(req.consumed);
            parser.reset();
            out.clear();
        }
    }
    command::pipeline::release_watches(srv, locks, &mut conn);
    // Keep the shared keyspace small across inputs.
    if flush_after(data) {
        let argv: [&[u8]; 1] = [b"FLUSHALL"];
        let _ = command::execute(srv, locks, &mut conn, &argv, &mut out);
    }
});

/// Whether to empty the shared keyspace after this input (about one input in seven).
fn flush_after(data: &[u8]) -> bool {
    data.len() % 7 == 0
}
