//! Fuzz target: arbitrary bytes as a WAL segment. Reading batches must stop at a torn or
//! corrupt batch with an answer, never panic or read out of bounds, and whatever it accepts
//! must decode into records or be refused; records framed from the input read back as framed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use terrace_engine::wal::frame;

fuzz_target!(|data: &[u8]| {
    let mut pos = 0;
    while let Ok(Some(b)) = frame::read(&data[pos..]) {
        let _ = frame::records(b.payload, b.count);
        pos += b.len;
    }
    // The input as one record's arguments, framed and read back.
    let args: Vec<&[u8]> = data.split(|&b| b == 0).take(64).collect();
    if args.is_empty() {
        return;
    }
    let mut payload = Vec::new();
    frame::put_record(&mut payload, 1_700_000_000_000, data.len() % 4096, 16, &args);
    let mut framed = Vec::new();
    frame::frame(&mut framed, 7, 1, &payload);
    let b = frame::read(&framed).expect("our own batch").expect("not empty");
    let recs = frame::records(b.payload, b.count).expect("our own records");
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].argv.iter().map(Vec::as_slice).collect::<Vec<_>>(), args);
});
