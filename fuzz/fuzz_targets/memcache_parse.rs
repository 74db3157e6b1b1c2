//! Fuzz target: arbitrary bytes through the proxy's Memcached text/meta parser, fed in chunks
//! of varying size and consumed as the connection does (including swallowing the data block of
//! an item too large to store: `shared/chunked.rs`). Any panic, hang, or a parse that consumes
//! nothing or more than the buffer is a bug.

#![no_main]

#[path = "shared/chunked.rs"]
mod chunked;

use chunked::{feed, Step};
use libfuzzer_sys::fuzz_target;
use terrace_proxy::frontend::memcache::parse::{parse, Parsed};

fuzz_target!(|data: &[u8]| {
    feed(data, |buf| match parse(buf, 4096) {
        // A line too long: the connection closes.
        Err(_) => Step::Close,
        Ok(None) => Step::Incomplete,
        Ok(Some(Parsed { consumed, command, swallow })) => {
            if let Ok(cmd) = &command {
                // Whatever parsed must be printable (what the front end formats from).
                let _ = format!("{cmd:?}");
            }
            Step::Request { consumed, swallow }
        }
    });
});
