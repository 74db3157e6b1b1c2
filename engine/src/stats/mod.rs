//! Statistics the cost model needs, per tenant: `mrc` (the online miss-ratio curve and access
//! intervals) and `tenant` (operation mix, QPS windows, the curve's feed). `observe` is the
//! one call the dispatcher makes per command.

pub mod mrc;
pub mod recorder;
pub mod tenant;
pub mod workload;

use terrace_commands::table::CommandSpec;

/// What `observe` feeds: every tenant's statistics (by namespace) and the workload recorder.
pub struct Observer<'a> {
    pub tenants: &'a [tenant::TenantStats],
    pub recorder: &'a recorder::Recorder,
}

/// Counts a data command `argv` run in database `db` and notes its keys' references (and,
/// while its tenant is recorded, the command itself). `reply_len`: bytes of its reply.
/// Connection and server commands (PING, INFO, CLIENT…) are not the tenant's workload.
#[inline]
pub fn observe(to: Observer<'_>, db: usize, spec: &CommandSpec, argv: &[&[u8]], now_ms: i64, reply_len: usize) {
    if spec.class == tenant::OTHER {
        return;
    }
    let ns = db / crate::keyspace::NUM_DBS;
    let Some(t) = to.tenants.get(ns) else { return };
    t.count(spec.class, spec.write);
    let recording = to.recorder.recording() == Some(ns);
    let threshold = if recording { to.recorder.threshold() } else { 0 };
    let mut sampled = false;
    terrace_commands::table::for_each_key(spec, argv, |k| {
        let h = crate::keyspace::hash_bytes(k);
        t.reference(h, now_ms.max(0) as u64);
        sampled |= recording && mrc::spatial(h) < threshold;
    });
    if sampled {
        let value_size = if spec.write { argv.iter().skip(2).map(|a| a.len()).max().unwrap_or(0) } else { reply_len };
        to.recorder.note(db, argv, value_size);
    }
}
