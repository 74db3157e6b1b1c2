//! Fuzz target: arbitrary bytes as compressed values and as dictionary files. Every codec,
//! trained once on record-like values, must decode anything to a value or an error — never
//! panic, hang or read out of bounds; a dictionary payload must load or be refused; and a
//! value encoded from the input must decode back to it.

#![no_main]

use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
use terrace_engine::compress::train::train;
use terrace_engine::compress::{deserialize, Codec, CodecKind};

static CODECS: LazyLock<Vec<Arc<dyn Codec>>> = LazyLock::new(|| {
    let sample: Vec<Vec<u8>> = (0..300)
        .map(|i| format!(r#"{{"id":{},"name":"n{}","lat":{}.{:04},"tz":"{}"}}"#, 1000 + i * 7, i, i % 90, i * 37 % 10_000, ["a/b", "c/d"][i % 2]).into_bytes())
        .collect();
    CodecKind::ALL.iter().map(|&k| train(k, &sample).expect("trains").codec).collect()
});

fuzz_target!(init: {
    // Dictionary loading catches the FSST crate's own assertions (a corrupt table is an
    // error); libFuzzer's hook would abort on those caught panics, the default one does not.
    // Uncaught panics still abort the run.
    std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
}, |data: &[u8]| {
    for c in CODECS.iter() {
        let _ = c.decode(data, &mut Vec::new());
        let mut enc = Vec::new();
        c.encode(data, &mut enc).expect("encoding never fails");
        let mut dec = Vec::new();
        c.decode(&enc, &mut dec).expect("own encoding decodes");
        assert_eq!(dec, data);
    }
    if let Some((&k, rest)) = data.split_first() {
        if let Some(kind) = CodecKind::from_bits(k % 4) {
            if let Ok(c) = deserialize(kind, rest) {
                let _ = c.decode(rest, &mut Vec::new());
            }
        }
    }
});
