//! Who may run a command through a proxy that many tenants share: every tenant (in its own
//! keyspace), only the tenant a TERRACE.* command names, only the operator (the proxy's admin
//! user), or nobody (it would switch a pooled engine connection to another namespace).
//!
//! Engine-wide state — settings, users, debugging, persistence, the slow log, replication,
//! the recorder, threads — is the operator's: one tenant changing or reading it changes or
//! reads every tenant's. Decided per call, since a container's subcommands differ (MEMORY
//! USAGE reads a key of the caller's; MEMORY STATS describes the whole engine).

use crate::table::{CommandId, CommandSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tenancy {
    /// Any client, on its own tenant's keys and state.
    Tenant,
    /// A TERRACE.* command naming a tenant at this argument: a tenant may name only itself.
    OwnTenant(usize),
    /// Engine-wide: the operator's (the proxy's admin user) alone.
    Operator,
    /// Never through a proxy: TERRACE.NAMESPACE would move the proxy's pooled engine
    /// connection into another tenant's keyspace (AUTH chooses a client's tenant).
    Never,
}

/// The CONFIG parameters a tenant sets and reads for itself (the engine keeps them per
/// namespace); every other parameter is the engine's.
pub const TENANT_PARAMS: &[&str] = &["notify-keyspace-events"];

fn tenant_param(name: &[u8]) -> bool {
    TENANT_PARAMS.iter().any(|p| name.eq_ignore_ascii_case(p.as_bytes()))
}

/// CONFIG GET or SET of the tenant's own parameters alone.
fn own_config(argv: &[&[u8]]) -> bool {
    match argv.get(1) {
        Some(s) if s.eq_ignore_ascii_case(b"get") => argv.len() >= 3 && argv[2..].iter().all(|p| tenant_param(p)),
        Some(s) if s.eq_ignore_ascii_case(b"set") => argv.len() >= 4 && argv.len().is_multiple_of(2) && argv[2..].chunks(2).all(|kv| tenant_param(kv[0])),
        _ => false,
    }
}

fn sub_is(argv: &[&[u8]], names: &[&str]) -> bool {
    argv.get(1).is_some_and(|s| names.iter().any(|n| s.eq_ignore_ascii_case(n.as_bytes())))
}

/// How a call of `spec` with `argv` may be run by tenants sharing a proxy.
pub fn tenancy(spec: &CommandSpec, argv: &[&[u8]]) -> Tenancy {
    use CommandId::*;
    use Tenancy::*;
    match spec.id {
        // A migration is the console's, engine to engine, and an engine's proof of its
        // password is given to whoever connects to it: never through a proxy.
        TerraceNamespace | TerraceNamespaces | TerraceDropnamespace | TerraceMigrate | TerraceProve => Never,
        Config if own_config(argv) => Tenant,
        // Users, settings, debugging, modules, replication, the process itself.
        Acl | Config | Debug | Module | Replicaof | Slaveof | Psync | Sync | Replconf | Shutdown | Monitor => Operator,
        // Persistence writes every tenant's data; the slow log shows every tenant's commands
        // with their arguments.
        Save | Bgsave | Slowlog | TerraceSlowlog => Operator,
        // The latency monitor is shared; reading it is harmless, resetting it is not.
        Latency if sub_is(argv, &["reset"]) => Operator,
        Memory if !sub_is(argv, &["usage", "help"]) => Operator,
        // Engine-wide figures and the one recorder every tenant would share.
        TerraceThreads | TerraceStats | TerraceEpoch | TerraceImport => Operator,
        TerraceRecord if sub_is(argv, &["sample"]) => OwnTenant(2),
        TerraceRecord => Operator,
        TerraceRetrain | TerraceWorkload | TerraceAdvise => OwnTenant(1),
        TerraceCosteval => OwnTenant(2),
        TerraceCompression if sub_is(argv, &["help"]) => Tenant,
        TerraceCompression => OwnTenant(2),
        _ => Tenant,
    }
}

/// Whether `argv` names tenant `name` where `tenancy` says a tenant is named (a call too
/// short to name one is left to the engine's arity and syntax errors).
pub fn names_tenant(tenancy: Tenancy, argv: &[&[u8]], name: &str) -> bool {
    match tenancy {
        Tenancy::OwnTenant(i) => argv.get(i).is_none_or(|a| *a == name.as_bytes()),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup;

    fn of(argv: &[&str]) -> Tenancy {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        tenancy(lookup(args[0]).unwrap(), &args)
    }

    #[test]
    fn engine_wide_commands_are_the_operators() {
        assert_eq!(of(&["terrace.namespace", "bob"]), Tenancy::Never);
        for argv in [
            &["config", "set", "maxmemory", "1"][..],
            &["config", "set", "notify-keyspace-events", "KEA", "maxmemory", "1"],
            &["config", "get", "notify*"],
            &["acl", "setuser", "default", "-get"],
            &["debug", "sleep", "0"],
            &["memory", "stats"],
            &["slowlog", "get"],
            &["latency", "reset"],
            &["terrace.record", "stop"],
            &["terrace.stats"],
            &["bgsave"],
        ] {
            assert_eq!(of(argv), Tenancy::Operator, "{argv:?}");
        }
        for argv in [
            &["get", "k"][..],
            &["memory", "usage", "k"],
            &["latency", "latest"],
            &["flushall"],
            &["terrace.compression", "help"],
            &["config", "set", "notify-keyspace-events", "KEA"],
            &["config", "get", "NOTIFY-KEYSPACE-EVENTS"],
        ] {
            assert_eq!(of(argv), Tenancy::Tenant, "{argv:?}");
        }
    }

    #[test]
    fn a_tenant_may_name_only_itself() {
        let args: Vec<&[u8]> = vec![b"terrace.compression", b"config", b"bob", b"compression", b"none"];
        let t = tenancy(lookup(b"terrace.compression").unwrap(), &args);
        assert_eq!(t, Tenancy::OwnTenant(2));
        assert!(names_tenant(t, &args, "bob"));
        assert!(!names_tenant(t, &args, "alice"));
        let workload: Vec<&[u8]> = vec![b"terrace.workload", b""];
        assert!(!names_tenant(of(&["terrace.workload", ""]), &workload, "alice"), "the default tenant's empty name is not alice's");
        assert_eq!(of(&["terrace.record", "sample", "bob", "0"]), Tenancy::OwnTenant(2));
    }
}
