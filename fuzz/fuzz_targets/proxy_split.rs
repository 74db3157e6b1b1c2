//! Fuzz target: the proxy's request routing. Arbitrary bytes are parsed as client requests;
//! each is classified, its keys mapped to engines, multi-key commands split per engine, and
//! the per-engine replies (made up here: one element per key) merged back — the merged reply
//! must be one complete RESP frame with one element per key of the call. The same bytes are
//! also scanned as engine replies, in pieces, and must find the same frames as scanning whole.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use terrace_engine::command::lookup;
use terrace_engine::protocol::{Limits, RequestParser};
use terrace_proxy::merge::{merge, Merge};
use terrace_proxy::resp::{self, frame_len, FrameScanner};
use terrace_proxy::route::{classify, plan_split, target, Kind, Split};
use terrace_proxy::slots::SlotMap;

fn check_request(argv: &[&[u8]], map: &SlotMap) {
    let Some(spec) = lookup(argv[0]) else { return };
    if !terrace_engine::command::arity_ok(spec, argv.len()) {
        return;
    }
    let _ = target(spec, argv, map);
    let Kind::Split(s) = classify(spec, argv) else { return };
    if s == Split::Mset && argv.len() % 2 == 0 {
        return;
    }
    let Some(plan) = plan_split(s, argv, map) else { return };
    let keys = plan.positions.len();
    let step = if s == Split::Mset { 2 } else { 1 };
    assert_eq!(keys, (argv.len() - 1) / step);
    let mut replies = Vec::new();
    for (_, args) in &plan.parts {
        let n = (args.len() - 1) / step;
        let mut r = BytesMut::new();
        match s {
            Split::Mget => {
                resp::put_header(&mut r, b'*', n);
                for i in 0..n {
                    resp::put_bulk(&mut r, i.to_string().as_bytes());
                }
            }
            Split::Sum => r.extend_from_slice(format!(":{n}\r\n").as_bytes()),
            Split::Mset => r.extend_from_slice(b"+OK\r\n"),
        }
        replies.push(r);
    }
    let frames: Vec<&[u8]> = replies.iter().map(|r| &r[..]).collect();
    let kind = match s {
        Split::Mget => Merge::Positional(plan.positions),
        Split::Sum => Merge::Sum,
        Split::Mset => Merge::AllOk,
    };
    let mut out = BytesMut::new();
    merge(&kind, &frames, &mut out);
    assert_eq!(frame_len(&out), Ok(Some(out.len())), "merged reply is one frame");
    match s {
        Split::Mget => assert_eq!(resp::elements(&out).map(|e| e.len()), Some(keys)),
        Split::Sum => assert_eq!(resp::integer(&out), Some(keys as i64)),
        Split::Mset => assert_eq!(&out[..], b"+OK\r\n"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let map = SlotMap::even(1 + (first as usize % 4));
    let mut parser = RequestParser::new(Limits { max_bulk_len: 1 << 20, max_inline_len: 64 * 1024, max_args: 4096 });
    let mut buf = rest;
    while let Ok(Some(req)) = parser.parse(buf) {
        if !req.args.is_empty() {
            let argv: Vec<&[u8]> = (0..req.args.len()).map(|i| req.arg(buf, i)).collect();
            check_request(&argv, &map);
        }
        buf = &buf[req.consumed..];
        parser.reset();
    }
    // Reply scanning: piece by piece equals whole.
    let chunk = (first as usize % 16) + 1;
    let mut scanner = FrameScanner::default();
    let mut acc: Vec<u8> = Vec::new();
    let mut start = 0;
    for piece in rest.chunks(chunk) {
        acc.extend_from_slice(piece);
        loop {
            match scanner.scan(&acc[start..]) {
                Ok(Some(n)) => {
                    assert_eq!(frame_len(&acc[start..]), Ok(Some(n)));
                    start += n;
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
