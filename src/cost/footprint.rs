//! Footprint scaling. A spatial sample holds a fraction of a tenant's keys, so replaying it
//! touches that fraction of the memory: a sample of 10k records fits in the CPU caches where
//! the tenant's 100k do not, and a codec whose dictionary competes with the data for them (zstd
//! with a dictionary) measures faster on the sample than it runs. Before the measurement the
//! sample is replicated back towards the tenant's key count: each sampled key gets replicas
//! (`key~1`, `key~2`, …) holding its value, and each recorded command goes to one of the key's
//! replicas at random, so every key's popularity is spread over its replicas and the hot set
//! keeps its share of the accesses. Bounded by `MAX_BYTES` of data: the point is the caches,
//! not to rebuild a large tenant.

use std::collections::HashSet;

use super::trace::{Arg, Meta, Op, Record};

/// The most data (keys and serialized values) a scaled sample may hold.
pub const MAX_BYTES: f64 = 256.0 * 1024.0 * 1024.0;

/// How many copies of the sample stand for the tenant: its key count over the sample's,
/// bounded by `MAX_BYTES`; 1 for a full recording.
pub fn factor(meta: &Meta, data: &[Record]) -> usize {
    let keys = meta.workload["keys"].as_f64().unwrap_or(0.0);
    if data.is_empty() || keys <= data.len() as f64 * 1.5 {
        return 1;
    }
    let bytes: f64 = data.iter().map(|r| (r.key.len() + r.dump.len()) as f64).sum();
    let by_keys = keys / data.len() as f64;
    let by_bytes = MAX_BYTES / bytes.max(1.0);
    by_keys.min(by_bytes).floor().clamp(1.0, 1000.0) as usize
}

fn replica(key: &[u8], r: usize) -> Vec<u8> {
    if r == 0 {
        return key.to_vec();
    }
    let mut k = key.to_vec();
    k.push(b'~');
    k.extend_from_slice(r.to_string().as_bytes());
    k
}

/// The sample `factor` times over, and the trace spread over the replicas.
pub fn scale_up(data: &[Record], ops: &[Op], factor: usize) -> (Vec<Record>, Vec<Op>) {
    if factor <= 1 {
        return (data.to_vec(), ops.to_vec());
    }
    let mut scaled = Vec::with_capacity(data.len() * factor);
    for r in 0..factor {
        scaled.extend(data.iter().map(|d| Record { key: replica(&d.key, r), ..d.clone() }));
    }
    let keys: HashSet<&[u8]> = data.iter().map(|d| d.key.as_slice()).collect();
    let mut rng = fastrand::Rng::with_seed(7);
    let spread = ops
        .iter()
        .map(|op| {
            let r = rng.usize(0..factor);
            let args = op
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Arg::Bytes(b) if i > 0 && keys.contains(b.as_slice()) => Arg::Bytes(replica(b, r)),
                    other => other.clone(),
                })
                .collect();
            Op { args, ..op.clone() }
        })
        .collect();
    (scaled, spread)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str) -> Record {
        Record { db: 0, key: key.as_bytes().to_vec(), pttl: -1, dump: vec![0; 100] }
    }

    fn op(args: &[&str]) -> Op {
        Op { micros: 0, db: 0, value_size: 0, args: args.iter().map(|a| Arg::Bytes(a.as_bytes().to_vec())).collect() }
    }

    #[test]
    fn replicas_spread_the_accesses_and_keep_the_rest() {
        let data = vec![rec("a"), rec("b")];
        let ops: Vec<Op> = (0..1000).map(|i| op(&["GET", if i % 4 == 0 { "b" } else { "a" }])).chain([op(&["MSET", "a", "a", "b", "v"])]).collect();
        let (d, o) = scale_up(&data, &ops, 5);
        assert_eq!(d.len(), 10);
        assert!(d.iter().any(|r| r.key == b"a~4") && d.iter().any(|r| r.key == b"b"));
        let keys: HashSet<Vec<u8>> = d.iter().map(|r| r.key.clone()).collect();
        let touched: HashSet<Vec<u8>> = o.iter().filter_map(|op| op.key().map(<[u8]>::to_vec)).collect();
        assert!(touched.iter().all(|k| keys.contains(k)), "every command names a loaded key");
        assert_eq!(touched.len(), 10, "every replica is used");
        // The hot key keeps its share: three quarters of the GETs go to a's replicas.
        let to_a = o.iter().filter(|op| op.key().is_some_and(|k| k.starts_with(b"a"))).count();
        assert!((740..=760).contains(&(to_a - 1)), "{to_a}");
        // Names and values are not keys: MSET a a b v keeps its values, renames its keys.
        let mset = o.last().unwrap();
        assert!(matches!(&mset.args[2], Arg::Bytes(v) if v == b"a" || v.starts_with(b"a~")));
        assert!(matches!(&mset.args[4], Arg::Bytes(v) if v == b"v"));
        let (same, _) = scale_up(&data, &ops, 1);
        assert_eq!(same, data);
    }
}
