//! The PMem tier: DRAM extended by a memory-mapped arena (TierBase's value placement, with
//! the admission policies of Kassa et al., ACM TOS 2022, §4.2).
//!
//! - `slabs`: space bookkeeping (size classes, large runs, fragmentation).
//! - `arena`: the mapped file, its header, and the address registry entries release through.
//! - `demote`: choosing cold DRAM values by their access stamps and moving them in batches.
//! - `warm`: the index written at a clean shutdown so the next start serves the same data.
//!
//! Here: the policies, the tier's counters, and the conversions between a DRAM value and
//! its PMem form (a string's stored bytes as they are; a collection frozen as an RDB object).
//! Keys, the index and entry metadata never leave DRAM.

pub mod arena;
pub mod demote;
pub mod slabs;
pub mod warm;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::keyspace::entry::DramValue;
use crate::keyspace::{Entry, Kind, Meta, ValueRef};
use crate::rdb::{decode_value, encode_object, Reader, Restored};
use arena::Arena;

/// Values smaller than this stay in DRAM: their PMem reference would save nothing.
pub const MIN_PMEM_VALUE: usize = 16;

/// Where new values go and whether values come back (Kassa et al. §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// New values in DRAM; cold DRAM values are demoted; PMem values are read in place.
    DramFirst,
    /// New values in PMem; promoted to DRAM after `promote_hits` reads.
    PmemFirst,
    /// DRAM-first, and demoted values are promoted back after `promote_hits` reads.
    Bidirectional,
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s.to_ascii_lowercase().as_str() {
            "dram-first" => Ok(Policy::DramFirst),
            "pmem-first" => Ok(Policy::PmemFirst),
            "bidirectional" => Ok(Policy::Bidirectional),
            _ => Err(format!("'{s}' is not one of dram-first, pmem-first, bidirectional")),
        }
    }
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::DramFirst => "dram-first",
            Policy::PmemFirst => "pmem-first",
            Policy::Bidirectional => "bidirectional",
        }
    }
    /// Whether values read often in PMem move to DRAM.
    pub fn promotes(self) -> bool {
        self != Policy::DramFirst
    }
}

/// How one tenant uses the tier (`TERRACE.NAMESPACE … TIER-POLICY`): as the engine's
/// `tier_policy` says, never (its values stay in DRAM), or by a policy of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantPolicy {
    Engine,
    DramOnly,
    Own(Policy),
}

impl FromStr for TenantPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<TenantPolicy, String> {
        match s.to_ascii_lowercase().as_str() {
            "engine" => Ok(TenantPolicy::Engine),
            "dram-only" => Ok(TenantPolicy::DramOnly),
            other => other.parse().map(TenantPolicy::Own).map_err(|_| format!("'{s}' is not one of engine, dram-only, dram-first, pmem-first, bidirectional")),
        }
    }
}

impl TenantPolicy {
    fn code(self) -> u8 {
        match self {
            TenantPolicy::Engine => 0,
            TenantPolicy::DramOnly => 1,
            TenantPolicy::Own(Policy::DramFirst) => 2,
            TenantPolicy::Own(Policy::PmemFirst) => 3,
            TenantPolicy::Own(Policy::Bidirectional) => 4,
        }
    }

    fn of(code: u8) -> TenantPolicy {
        match code {
            1 => TenantPolicy::DramOnly,
            2 => TenantPolicy::Own(Policy::DramFirst),
            3 => TenantPolicy::Own(Policy::PmemFirst),
            4 => TenantPolicy::Own(Policy::Bidirectional),
            _ => TenantPolicy::Engine,
        }
    }
}

/// The tier's settings (`[engine]` keys of the same names).
#[derive(Debug, Clone)]
pub struct TierConfig {
    pub pmem_path: PathBuf,
    pub pmem_size: u64,
    /// Budget for value bytes in DRAM.
    pub dram_max: u64,
    pub policy: Policy,
    pub promote_hits: u8,
}

/// Counters for INFO `tiers` and TERRACE.STATS.
#[derive(Default)]
pub struct Counters {
    pub dram_hits: AtomicU64,
    pub pmem_hits: AtomicU64,
    pub promotions: AtomicU64,
    pub demotions: AtomicU64,
    pub demotion_batches: AtomicU64,
    /// pmem-first writes kept in DRAM because the arena was full.
    pub admission_fallbacks: AtomicU64,
    /// Demotions that found the arena full.
    pub arena_full: AtomicU64,
}

pub struct Tier {
    pub arena: Arc<Arena>,
    pub config: TierConfig,
    /// Value bytes in DRAM (strings and collections; every shard adds to it).
    pub dram_values: Arc<AtomicI64>,
    pub counters: Counters,
    /// The last demotion found no room: the eviction policy decides now.
    pub full: AtomicBool,
    /// Round-robin position of demotion over shards.
    pub cursor: AtomicUsize,
    /// Per namespace: its `TenantPolicy` code.
    tenants: Box<[std::sync::atomic::AtomicU8]>,
}

impl Tier {
    pub fn new(arena: Arc<Arena>, config: TierConfig, namespaces: usize) -> Tier {
        let tenants = (0..namespaces.max(1)).map(|_| std::sync::atomic::AtomicU8::new(0)).collect();
        Tier {
            arena,
            config,
            dram_values: Arc::new(AtomicI64::new(0)),
            counters: Counters::default(),
            full: AtomicBool::new(false),
            cursor: AtomicUsize::new(0),
            tenants,
        }
    }

    pub fn set_tenant_policy(&self, ns: usize, p: TenantPolicy) {
        if let Some(slot) = self.tenants.get(ns) {
            slot.store(p.code(), Ordering::Relaxed);
        }
    }

    pub fn tenant_policy(&self, ns: usize) -> TenantPolicy {
        TenantPolicy::of(self.tenants.get(ns).map_or(0, |s| s.load(Ordering::Relaxed)))
    }

    /// The policy namespace `ns` follows; None: its values stay in DRAM.
    pub fn policy_of(&self, ns: usize) -> Option<Policy> {
        match self.tenant_policy(ns) {
            TenantPolicy::Engine => Some(self.config.policy),
            TenantPolicy::DramOnly => None,
            TenantPolicy::Own(p) => Some(p),
        }
    }

    pub fn dram_value_bytes(&self) -> u64 {
        self.dram_values.load(Ordering::Relaxed).max(0) as u64
    }

    /// Whether DRAM holds more value bytes than its budget.
    pub fn over_budget(&self) -> bool {
        self.dram_value_bytes() > self.config.dram_max
    }

    /// A new string entry of namespace `ns` under pmem-first: its stored bytes copied into the
    /// arena. None (the caller keeps it in DRAM) for other policies, tiny values, or a full
    /// arena.
    pub fn place_new(&self, ns: usize, kind_bits: u8, key: &[u8], stored: &[u8], meta: &Meta) -> Option<Entry> {
        if self.policy_of(ns) != Some(Policy::PmemFirst) || stored.len() < MIN_PMEM_VALUE {
            return None;
        }
        let Some(addr) = self.arena.alloc(stored.len()) else {
            self.counters.admission_fallbacks.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        // SAFETY: a fresh range of `stored.len()` bytes that nothing else references.
        unsafe { std::ptr::copy_nonoverlapping(stored.as_ptr(), addr, stored.len()) };
        Some(Entry::new_pmem(kind_bits, key, addr, stored.len(), meta))
    }

    /// Counts a read of `e` (of namespace `ns`); returns its DRAM copy when the policy
    /// promotes it now (a DRAM-only tenant's value found in PMem, demoted before the tenant
    /// said so, comes back on its first read).
    pub fn on_read(&self, ns: usize, e: &mut Entry) -> Option<Entry> {
        if !e.in_pmem() {
            return None;
        }
        let hits = e.note_pmem_hit();
        let promote = match self.policy_of(ns) {
            None => true,
            Some(p) => p.promotes() && hits >= self.config.promote_hits,
        };
        if promote {
            self.counters.promotions.fetch_add(1, Ordering::Relaxed);
            return promoted(e);
        }
        None
    }

    /// Counts the reads a command made (DRAM and PMem hits).
    pub fn count_hits(&self, dram: u64, pmem: u64) {
        if dram > 0 {
            self.counters.dram_hits.fetch_add(dram, Ordering::Relaxed);
        }
        if pmem > 0 {
            self.counters.pmem_hits.fetch_add(pmem, Ordering::Relaxed);
        }
    }

    /// The `# Tiers` section of INFO.
    pub fn info(&self, keys: u64) -> String {
        let s = self.snapshot(keys);
        format!(
            "# Tiers\r\ntier_policy:{}\r\npmem_path:{}\r\npmem_size:{}\r\ndram_max:{}\r\npromote_hits:{}\r\n\
             dram_keys:{}\r\npmem_keys:{}\r\ndram_value_bytes:{}\r\npmem_value_bytes:{}\r\npmem_allocated_bytes:{}\r\n\
             pmem_assigned_bytes:{}\r\npmem_capacity_bytes:{}\r\npmem_fragmentation:{:.4}\r\ndram_hits:{}\r\npmem_hits:{}\r\n\
             promotions:{}\r\ndemotions:{}\r\ndemotion_batches:{}\r\nadmission_fallbacks:{}\r\narena_full_events:{}\r\n\r\n",
            self.config.policy.name(),
            self.config.pmem_path.display(),
            self.config.pmem_size,
            self.config.dram_max,
            self.config.promote_hits,
            s.dram_keys,
            s.pmem_keys,
            s.dram_value_bytes,
            s.usage.values,
            s.usage.allocated,
            s.usage.assigned,
            s.usage.capacity,
            s.usage.fragmentation(),
            s.dram_hits,
            s.pmem_hits,
            s.promotions,
            s.demotions,
            s.demotion_batches,
            s.admission_fallbacks,
            s.arena_full,
        )
    }

    /// The tier's state as JSON (TERRACE.STATS).
    pub fn to_json(&self, keys: u64) -> serde_json::Value {
        let s = self.snapshot(keys);
        serde_json::json!({
            "policy": self.config.policy.name(),
            "pmem_path": self.config.pmem_path.display().to_string(),
            "pmem_size": self.config.pmem_size,
            "dram_max": self.config.dram_max,
            "promote_hits": self.config.promote_hits,
            "dram": { "keys": s.dram_keys, "value_bytes": s.dram_value_bytes, "hits": s.dram_hits },
            "pmem": {
                "keys": s.pmem_keys,
                "value_bytes": s.usage.values,
                "allocated_bytes": s.usage.allocated,
                "assigned_bytes": s.usage.assigned,
                "capacity_bytes": s.usage.capacity,
                "fragmentation": s.usage.fragmentation(),
                "hits": s.pmem_hits,
            },
            "promotions": s.promotions,
            "demotions": s.demotions,
            "demotion_batches": s.demotion_batches,
            "admission_fallbacks": s.admission_fallbacks,
            "arena_full_events": s.arena_full,
        })
    }

    fn snapshot(&self, keys: u64) -> Snapshot {
        let usage = self.arena.usage();
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            dram_keys: keys.saturating_sub(usage.count),
            pmem_keys: usage.count,
            dram_value_bytes: self.dram_value_bytes(),
            usage,
            dram_hits: load(&c.dram_hits),
            pmem_hits: load(&c.pmem_hits),
            promotions: load(&c.promotions),
            demotions: load(&c.demotions),
            demotion_batches: load(&c.demotion_batches),
            admission_fallbacks: load(&c.admission_fallbacks),
            arena_full: load(&c.arena_full),
        }
    }
}

struct Snapshot {
    dram_keys: u64,
    pmem_keys: u64,
    dram_value_bytes: u64,
    usage: slabs::Usage,
    dram_hits: u64,
    pmem_hits: u64,
    promotions: u64,
    demotions: u64,
    demotion_batches: u64,
    admission_fallbacks: u64,
    arena_full: u64,
}

/// Appends a DRAM entry's value in its PMem form: a string's stored bytes (compressed or
/// not) as they are, a collection as an RDB object. None for values already in PMem.
pub fn freeze(e: &Entry, out: &mut Vec<u8>) -> bool {
    match e.value() {
        ValueRef::Str(v) | ValueRef::Encoded(v) if !e.in_pmem() => out.extend_from_slice(v),
        ValueRef::Coll(c) => encode_object(ValueRef::Coll(c), None, out),
        _ => return false,
    }
    true
}

/// A frozen collection decoded (None if the bytes don't decode or hold another type).
pub(crate) fn thaw_bytes(kind: Kind, frozen: &[u8]) -> Option<crate::keyspace::Collection> {
    let mut r = Reader::new(frozen);
    let t = r.byte().ok()?;
    match decode_value(&mut r, t).ok()? {
        Restored::Coll(c) if c.kind() == kind => Some(c),
        _ => None,
    }
}

/// The DRAM form of a collection frozen in PMem (None: not one, or it does not decode).
pub fn thaw(e: &Entry) -> Option<Entry> {
    match e.value() {
        ValueRef::Frozen(kind, bytes) => thaw_bytes(kind, bytes).map(|c| e.in_dram(DramValue::Coll(c))),
        _ => None,
    }
}

/// The DRAM form of any value in PMem (None: in DRAM already, or undecodable).
pub fn promoted(e: &Entry) -> Option<Entry> {
    if e.kind() == Kind::Str {
        e.pmem_bytes().map(|b| e.in_dram(DramValue::Bytes(b)))
    } else {
        thaw(e)
    }
}

#[cfg(test)]
mod policy_names {
    #[test]
    fn every_tier_policy_name_the_proxy_accepts_parses() {
        for name in terrace_commands::settings::TIER_POLICIES {
            assert!(name.parse::<super::TenantPolicy>().is_ok(), "{name}");
        }
    }
}
