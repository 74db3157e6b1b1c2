//! Fuzz target: the glob matcher every pattern user shares (KEYS, SCAN MATCH, PSUBSCRIBE,
//! ACL patterns, CONFIG GET, CLIENT KILL). Small inputs must give the answer of Redis 7.0.15's
//! recursive matcher (`glob::reference`); any input, however many stars, must answer without
//! panicking and in linear-ish time (libFuzzer's -timeout catches a blow-up).

#![no_main]

use libfuzzer_sys::fuzz_target;
use terrace_commands::glob::{glob_match, reference};

fuzz_target!(|data: &[u8]| {
    // First byte: flags (nocase) and where the pattern ends; the rest: pattern, then subject.
    let Some((&head, rest)) = data.split_first() else { return };
    let nocase = head & 1 == 1;
    let split = if rest.is_empty() { 0 } else { (head as usize >> 1) % (rest.len() + 1) };
    let (pattern, subject) = rest.split_at(split);
    let got = glob_match(pattern, subject, nocase);
    if pattern.len() <= 12 && subject.len() <= 16 {
        let want = if subject.is_empty() { pattern.is_empty() } else { reference(pattern, subject, nocase, 0) };
        assert_eq!(got, want, "pattern {:?} subject {:?} nocase {nocase}", String::from_utf8_lossy(pattern), String::from_utf8_lossy(subject));
    }
});
