//! Fuzz target: arbitrary bytes through the proxy's Memcached binary protocol parser, fed in
//! chunks of varying size and consumed as the connection does (a body to discard after an
//! unknown opcode or a value too large: `shared/chunked.rs`). Any panic, or a parse that
//! consumes less than a header or more than the buffer, is a bug; a protocol error or bad
//! magic ends the connection.

#![no_main]

#[path = "shared/chunked.rs"]
mod chunked;

use chunked::{feed, Step};
use libfuzzer_sys::fuzz_target;
use terrace_proxy::frontend::memcache::binary::{parse, Parsed};

fuzz_target!(|data: &[u8]| {
    feed(data, |buf| match parse(buf, 4096) {
        Parsed::Incomplete => Step::Incomplete,
        Parsed::BadMagic | Parsed::ProtocolError { .. } => Step::Close,
        Parsed::Request { consumed, swallow, request } => {
            assert!(consumed >= 24, "consumed {consumed}: less than a header");
            let _ = format!("{request:?}");
            Step::Request { consumed, swallow }
        }
    });
});
