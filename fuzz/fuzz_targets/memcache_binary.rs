//! Fuzz target: arbitrary bytes through the proxy's Memcached binary protocol parser, fed in
//! chunks of varying size and consumed as the connection does (a body to discard after an
//! unknown opcode or a value too large). Any panic, or a parse that consumes nothing or more
//! than the buffer, is a bug; a protocol error or bad magic ends the connection.

#![no_main]

use libfuzzer_sys::fuzz_target;
use terrace_proxy::frontend::memcache::binary::{parse, Parsed};

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let chunk = (first as usize % 64) + 1;
    let item_max = 4096;
    let mut buf: Vec<u8> = Vec::new();
    let mut swallow = 0usize;
    for piece in rest.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            if swallow > 0 {
                let n = swallow.min(buf.len());
                buf.drain(..n);
                swallow -= n;
                if swallow > 0 {
                    break;
                }
            }
            match parse(&buf, item_max) {
                Parsed::Incomplete => break,
                Parsed::BadMagic | Parsed::ProtocolError { .. } => return,
                Parsed::Request { consumed, swallow: skip, request } => {
                    assert!(consumed >= 24 && consumed <= buf.len(), "consumed {consumed} of {}", buf.len());
                    let _ = format!("{request:?}");
                    buf.drain(..consumed);
                    swallow = skip;
                }
            }
        }
    }
});
