//! Fuzz target: arbitrary bytes through the proxy's Memcached text/meta parser, fed in chunks
//! of varying size and consumed as the connection does (including swallowing the data block of
//! an item too large to store). Any panic, hang, or a parse that consumes nothing or more than
//! the buffer is a bug.

#![no_main]

use libfuzzer_sys::fuzz_target;
use terrace_proxy::frontend::memcache::parse::{parse, Parsed};

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
                Err(_) => return, // line too long: the connection closes
                Ok(None) => break,
                Ok(Some(Parsed { consumed, command, swallow: skip })) => {
                    assert!(consumed > 0 && consumed <= buf.len(), "consumed {consumed} of {}", buf.len());
                    if let Ok(cmd) = &command {
                        // Whatever parsed must be printable (what the front end formats from).
                        let _ = format!("{cmd:?}");
                    }
                    buf.drain(..consumed);
                    swallow = skip;
                }
            }
        }
    }
});
