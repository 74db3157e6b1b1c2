//! Statistics the cost model needs, per tenant: `mrc` (the online miss-ratio curve and access
//! intervals) and `tenant` (operation mix, QPS windows, the curve's feed). `observe` is the
//! one call the dispatcher makes per command.

pub mod mrc;
pub mod tenant;
pub mod workload;

use crate::command::table::CommandSpec;
use crate::server::state::Server;

/// Counts a data command `argv` run in namespace `ns` and notes its keys' references.
/// Connection and server commands (PING, INFO, CLIENT…) are not the tenant's workload.
#[inline]
pub fn observe(srv: &Server, ns: usize, spec: &CommandSpec, argv: &[&[u8]], now_ms: i64) {
    if spec.class == tenant::OTHER {
        return;
    }
    let Some(t) = srv.tenant_stats.get(ns) else { return };
    t.count(spec.class, spec.write);
    crate::command::table::for_each_key(spec, argv, |k| t.reference(crate::keyspace::hash_bytes(k), now_ms.max(0) as u64));
}
