//! Property tests: every codec, trained on realistic records, returns exactly what it was
//! given — arbitrary bytes, empty, huge, incompressible, unicode — and never panics on
//! corrupt payloads.

use std::sync::{Arc, LazyLock};

use proptest::prelude::*;

use super::train::train;
use super::{Codec, CodecKind};

fn sample() -> Vec<Vec<u8>> {
    let zones = ["Europe/Paris", "Asia/Tokyo", "America/Chicago", "Africa/Lagos"];
    (0..400)
        .map(|i| {
            format!(
                r#"{{"id":{},"name":"Ville {} ✓","lat":{}.{:05},"lon":-{}.{:04},"tz":"{}","code":"{:02}"}}"#,
                100_000 + i * 37,
                i,
                i % 80,
                i * 7919 % 100_000,
                i % 170,
                i * 31 % 10_000,
                zones[i % 4],
                i % 40
            )
            .into_bytes()
        })
        .collect()
}

static CODECS: LazyLock<Vec<Arc<dyn Codec>>> =
    LazyLock::new(|| CodecKind::ALL.iter().map(|&k| train(k, &sample()).expect("training on a good sample").codec).collect());

fn round_trip(raw: &[u8]) {
    for c in CODECS.iter() {
        let mut enc = Vec::new();
        c.encode(raw, &mut enc).unwrap_or_else(|e| panic!("{}: {e}", c.kind().name()));
        let mut dec = Vec::new();
        c.decode(&enc, &mut dec).unwrap_or_else(|e| panic!("{}: {e}", c.kind().name()));
        assert_eq!(dec, raw, "{}", c.kind().name());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_round_trip(raw in proptest::collection::vec(any::<u8>(), 0..3000)) {
        round_trip(&raw);
    }

    #[test]
    fn unicode_text_round_trips(s in "\\PC{0,300}") {
        round_trip(s.as_bytes());
    }

    #[test]
    fn record_like_values_round_trip(id in 0i64..i64::MAX, name in "[a-zA-Z é✓\"\\\\,:{}]{0,40}", lat in -90.0f64..90.0, tz in "[A-Za-z/_]{0,20}") {
        let rec = format!(r#"{{"id":{id},"name":"{name}","lat":{lat},"lon":-0.0,"tz":"{tz}","code":"07"}}"#);
        round_trip(rec.as_bytes());
    }

    #[test]
    fn corrupt_payloads_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..400)) {
        for c in CODECS.iter() {
            let _ = c.decode(&raw, &mut Vec::new());
        }
    }
}

#[test]
fn edge_values_round_trip() {
    round_trip(b"");
    round_trip(&[0]);
    round_trip(&vec![b'a'; 4 << 20]);
    let mut noise = vec![0u8; 1 << 20];
    noise.iter_mut().for_each(|b| *b = fastrand::u8(..));
    round_trip(&noise);
    round_trip("Ελληνικά, 日本語, עברית, emoji 🦀".as_bytes());
    for rec in sample().iter().take(20) {
        round_trip(rec);
    }
}
