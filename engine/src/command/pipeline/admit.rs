//! Admission: whether a command may run now, decided from its metadata, the caller and what
//! the server says through `Gate`. Pure: no locks, no I/O, no counters; the driver acts on
//! the verdict (queues, counts, logs ACL denials, writes the error). The same rules serve a
//! client's request, EXEC's queued commands and a script's `redis.call`, each with the checks
//! Redis makes in that place.

use crate::acl::{Denied, User};
use crate::command::table::{self, CommandId, CommandSpec, Flags};
use crate::config::DebugCommand;
use crate::scripting::shebang::Declared;

/// The flags admission goes by: the command's own, or for a script command whose script
/// declared flags, those (Redis's `scriptFlagsToCmdFlags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Effective {
    write: bool,
    may_replicate: bool,
    denyoom: bool,
    /// EVAL, EVALSHA, FCALL and their read-only forms: memory is made room for before they
    /// run even without `denyoom`, so the commands inside see what eviction could free.
    script: bool,
}

impl Effective {
    fn of(spec: &CommandSpec, argv: &[&[u8]], ns: usize, gate: &impl Gate) -> Effective {
        let script = matches!(spec.id, CommandId::Eval | CommandId::Evalsha | CommandId::EvalRo | CommandId::EvalshaRo | CommandId::Fcall | CommandId::FcallRo);
        // FUNCTION LOAD and RESTORE may grow memory (Redis flags those subcommands denyoom).
        let sub = |name: &[u8]| argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(name));
        let loads_code = spec.id == CommandId::Function && (sub(b"load") || sub(b"restore"));
        let own = Effective { write: spec.write, may_replicate: spec.flags.has(Flags::MAY_REPLICATE), denyoom: spec.denyoom || loads_code, script };
        if !script {
            return own;
        }
        match gate.declared_flags(spec, ns, argv) {
            // No-writes implies allow-oom; what may replicate is now known.
            Some(d) => Effective { write: !d.no_writes, may_replicate: false, denyoom: !(d.allow_oom || d.no_writes), script },
            None => own,
        }
    }

    fn writes(&self) -> bool {
        self.write || self.may_replicate
    }
}

/// Who asks for a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A client's request.
    Client,
    /// A WAL record replayed at start: the log's state is reproduced exactly, whatever the
    /// engine's role (a fenced restart replays too), memory, ACL rules or pauses say — a
    /// refused record would be an acknowledged write lost.
    Replay,
    /// A command queued in MULTI, run by EXEC.
    Exec,
    /// `redis.call`/`redis.pcall` from a script or a library function; `readonly` for
    /// EVAL_RO, EVALSHA_RO, FCALL_RO and `no-writes` scripts; `deny_oom` while commands that
    /// may grow memory are refused when the server is out of memory (a script without a
    /// shebang that has written nothing yet, as Redis's compatibility mode).
    Script { readonly: bool, deny_oom: bool },
}

/// What admission needs to know about the connection.
pub struct Caller<'a> {
    pub authenticated: bool,
    pub in_multi: bool,
    /// The transaction being queued holds a command that writes or may replicate (EXEC is
    /// then held by CLIENT PAUSE WRITE).
    pub multi_writes: bool,
    /// … and one that may grow memory (EXEC is refused while out of memory).
    pub multi_denyoom: bool,
    /// Bytes the transaction being queued holds.
    pub multi_bytes: u64,
    /// Subscribed over RESP2: only (un)subscribing, PING, QUIT and RESET may run.
    pub subscribed_resp2: bool,
    /// The replication link applying its master's stream (writes on a replica).
    pub master: bool,
    pub user: &'a User,
    pub namespace: usize,
    /// The client's address (`ip:port`; something else, such as "wal", for the engine's own
    /// connections).
    pub peer: &'a str,
}

impl Caller<'_> {
    /// Connected over loopback (Redis's "local connection"; the engine's own count as local).
    fn local(&self) -> bool {
        self.peer.parse::<std::net::SocketAddr>().map_or(true, |a| a.ip().is_loopback())
    }
}

/// What admission asks of the server, only when a rule needs it.
pub trait Gate {
    fn auth_required(&self) -> bool;
    /// Whether namespace `ns`'s script runs past the busy threshold: Some(true) for a
    /// library function (FCALL), Some(false) for EVAL's. (Another tenant's script does not
    /// make this one's commands wait: it holds its own namespace's shards.)
    fn script_busy(&self, ns: usize) -> Option<bool>;
    /// Until when CLIENT PAUSE holds this command back (unix ms), if it does; `writes`: it
    /// writes or may replicate (by its flags, a script's declared ones, or for EXEC the
    /// queued commands').
    fn paused_until(&self, writes: bool, spec: &CommandSpec) -> Option<i64>;
    /// The flags a script command's script or function declared (None: not a script
    /// command, or a script without a shebang).
    fn declared_flags(&self, spec: &CommandSpec, ns: usize, argv: &[&[u8]]) -> Option<Declared>;
    /// Whether memory is over `maxmemory`, or namespace `ns` would be over its quota with
    /// `incoming` more bytes (a pure read, for commands inside a script, which holds its
    /// namespace's locks and cannot evict).
    fn over_memory(&self, ns: usize, incoming: u64) -> bool;
    /// Whether namespace `ns`'s quota has room for `incoming` more bytes (pure).
    fn namespace_room(&self, ns: usize, incoming: u64) -> bool;
    /// The most one transaction may hold queued (`client-query-buffer-limit`: the queue is
    /// what the client sent, kept).
    fn queue_limit(&self) -> u64;
    /// Why the WAL refuses writes, if it is poisoned.
    fn wal_poisoned(&self) -> Option<String>;
    /// Whether namespace `ns` is backed by a storage tier.
    fn storage_backed(&self, ns: usize) -> bool;
    /// Makes room for a command that may grow memory (demotion, eviction), and namespace
    /// `ns` by `incoming` bytes; false: refuse.
    fn make_room(&self, ns: usize, incoming: u64) -> bool;
    /// Who may run DEBUG (`enable-debug-command`).
    fn debug_command(&self) -> DebugCommand;
    /// Whether this engine is a replica (its clients may not write).
    fn read_only_replica(&self) -> bool;
    /// Whether fewer good replicas are attached than `min-replicas-to-write` asks.
    fn too_few_replicas(&self) -> bool;
    /// Whether the engine waits for a REPLICAOF to give it a role (`wait_for_role`).
    fn fenced(&self) -> bool;
    /// Whether this primary's term lease ran out (`TERRACE.EPOCH … LEASE`).
    fn lease_lapsed(&self) -> bool;
    /// Whether a replica is loading its master's snapshot.
    fn loading(&self) -> bool;
}

/// What admission decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Run,
    /// Inside MULTI: queue it for EXEC (`writes`: it writes or may replicate; `denyoom`: it
    /// may grow memory, so EXEC is refused while memory is full).
    Queue {
        writes: bool,
        denyoom: bool,
    },
    /// CLIENT PAUSE holds it until this unix time (ms).
    Pause(i64),
    Refuse(Refusal),
}

/// Why a command was refused. Each has Redis's error text for its origin.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No such command (decided by the driver, before admission).
    Unknown,
    Arity,
    NoAuth,
    Denied(Denied),
    Subscribed,
    /// A script is busy; true when it is a library function (the words name FUNCTION KILL).
    Busy(bool),
    WalPoisoned(String),
    Oom,
    /// The transaction's queued commands would pass this many bytes.
    QueueFull(u64),
    NotInMulti,
    NotInScript,
    WriteInReadonlyScript,
    /// FLUSHALL, FLUSHDB and SWAPDB in a storage-backed tenant.
    NotWithStorage,
    /// DEBUG while `enable-debug-command` does not allow it for this client.
    DebugNotAllowed,
    /// A write on a replica, by a client (or its script) rather than the master's stream.
    ReadOnlyReplica,
    /// A write while fewer good replicas are attached than `min-replicas-to-write`.
    NoReplicas,
    /// Anything but what a replica with no master answers (Redis's `stale` commands), while
    /// the engine waits for its role.
    Fenced,
    /// An administrative command arriving in the master's replication stream.
    NotFromMaster,
    /// Anything but Redis's `loading` commands while a replica loads its master's snapshot.
    Loading,
    /// A write while this primary's term lease has run out (it may have been replaced).
    LeaseLapsed,
}

/// Decides whether command `spec` (found by `argv[0]`) may run for `caller`. An
/// unknown name never gets here: its driver refuses it as `Refusal::Unknown`.
pub fn admit(origin: Origin, spec: &CommandSpec, argv: &[&[u8]], caller: &Caller, gate: &impl Gate) -> Verdict {
    use Refusal::*;
    if !super::super::arity_ok(spec, argv.len()) {
        return Verdict::Refuse(Arity);
    }
    if origin == Origin::Client && spec.id == CommandId::Debug {
        let allowed = match gate.debug_command() {
            DebugCommand::Yes => true,
            DebugCommand::Local => caller.local(),
            DebugCommand::No => false,
        };
        if !allowed {
            return Verdict::Refuse(DebugNotAllowed);
        }
    }
    if let Origin::Script { readonly, deny_oom } = origin {
        // (CLUSTER RESET is `noscript` on its own, as Redis flags that subcommand.)
        let cluster_reset = spec.id == CommandId::Cluster && argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"reset"));
        if spec.flags.has(Flags::NOSCRIPT) || cluster_reset {
            return Verdict::Refuse(NotInScript);
        }
        // (What may replicate, PUBLISH say, counts as a write here, as in Redis.)
        if readonly && (spec.write || spec.flags.has(Flags::MAY_REPLICATE)) {
            return Verdict::Refuse(WriteInReadonlyScript);
        }
        if spec.write && !caller.master && gate.read_only_replica() {
            return Verdict::Refuse(ReadOnlyReplica);
        }
        if spec.write && !caller.master && gate.too_few_replicas() {
            return Verdict::Refuse(NoReplicas);
        }
        if deny_oom && spec.denyoom && gate.over_memory(caller.namespace, growth_bound(spec, argv)) {
            return Verdict::Refuse(Oom);
        }
    }
    // A master's stream carries writes and what frames them: an administrative command in
    // it (SHUTDOWN, CONFIG, REPLICAOF, DEBUG…) is not the master's to make a replica run.
    if caller.master && origin == Origin::Client && spec.flags.has(Flags::ADMIN) && !spec.write {
        return Verdict::Refuse(NotFromMaster);
    }
    let effective = Effective::of(spec, argv, caller.namespace, gate);
    if origin == Origin::Client && !caller.authenticated && !spec.no_auth && gate.auth_required() {
        return Verdict::Refuse(NoAuth);
    }
    if origin == Origin::Client && !caller.master && gate.fenced() && !(spec.flags.has(Flags::STALE) || spec.id == CommandId::Ping) {
        return Verdict::Refuse(Fenced);
    }
    if origin == Origin::Client && !caller.master && gate.loading() && !spec.flags.has(Flags::LOADING) {
        return Verdict::Refuse(Loading);
    }
    // The master's stream is applied whatever this replica's ACL rules, memory or running
    // script say (Redis's master client is not checked either): refusing a command of it
    // would leave the replica diverged for good.
    if !caller.user.unrestricted && !caller.master && origin != Origin::Replay {
        if let Err(denied) = caller.user.check(spec.id.index(), argv) {
            return Verdict::Refuse(Denied(denied));
        }
    }
    if origin == Origin::Client {
        if caller.subscribed_resp2 && !crate::command::pubsub::allowed_while_subscribed(spec.id) {
            return Verdict::Refuse(Subscribed);
        }
        if let Some(function) = gate.script_busy(caller.namespace).filter(|_| !allowed_while_busy(spec, argv) && !caller.master) {
            return Verdict::Refuse(Busy(function));
        }
        // (As Redis: by the command's own flags, or those its script declared; a write
        // inside a script without flags is refused when it runs.)
        if effective.write && !caller.master && gate.read_only_replica() {
            return Verdict::Refuse(ReadOnlyReplica);
        }
        let exec_writes = spec.id == CommandId::Exec && caller.multi_writes;
        if (effective.write || exec_writes) && !caller.master && gate.too_few_replicas() {
            return Verdict::Refuse(NoReplicas);
        }
        // (Checked on the top-level command only: a transaction or script admitted under the
        // lease runs whole, never cut midway.)
        if (effective.writes() || exec_writes) && !caller.master && gate.lease_lapsed() {
            return Verdict::Refuse(LeaseLapsed);
        }
        let writes = if spec.id == CommandId::Exec { caller.multi_writes } else { effective.writes() };
        if let Some(until) = gate.paused_until(writes, spec).filter(|_| !caller.master) {
            return Verdict::Pause(until);
        }
    }
    if spec.write {
        if let Some(why) = gate.wal_poisoned() {
            return Verdict::Refuse(WalPoisoned(why));
        }
    }
    if origin == Origin::Client {
        // EXEC may grow memory if a command it queued may (Redis refuses it then).
        let denyoom = effective.denyoom || (spec.id == CommandId::Exec && caller.multi_denyoom);
        let queueing = caller.in_multi && !spec.txn_control;
        if (denyoom || effective.script) && !caller.master {
            // Room is made before any script too (the commands inside see what eviction
            // freed), but only what may grow memory is refused without it. (EXEC's queued
            // commands are already counted, as queued bytes.)
            let incoming = if denyoom && !queueing && spec.id != CommandId::Exec { growth_bound(spec, argv) } else { 0 };
            let room = gate.make_room(caller.namespace, incoming);
            if denyoom && !room {
                return Verdict::Refuse(Oom);
            }
        }
        if queueing && !caller.master {
            // A queued command is held until EXEC: bounded per transaction, and counted in
            // the tenant's quota whatever it does.
            let size = crate::keyspace::queued::queued_size(argv);
            if caller.multi_bytes + size > gate.queue_limit() {
                return Verdict::Refuse(QueueFull(gate.queue_limit()));
            }
            if !gate.namespace_room(caller.namespace, size) {
                return Verdict::Refuse(Oom);
            }
        }
        if queueing {
            return if spec.no_multi { Verdict::Refuse(NotInMulti) } else { Verdict::Queue { writes: effective.writes(), denyoom: effective.denyoom } };
        }
    }
    if matches!(spec.id, CommandId::Flushall | CommandId::Flushdb | CommandId::Swapdb) && gate.storage_backed(caller.namespace) {
        return Verdict::Refuse(NotWithStorage);
    }
    Verdict::Run
}

/// What may run while a script is busy: SCRIPT KILL, FUNCTION KILL and STATS, SHUTDOWN, and
/// the connection commands Redis flags `allow_busy`.
fn allowed_while_busy(spec: &CommandSpec, argv: &[&[u8]]) -> bool {
    let sub = |name: &str| argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(name.as_bytes()));
    spec.flags.has(Flags::ALLOW_BUSY) || (spec.id == CommandId::Script && sub("kill")) || (spec.id == CommandId::Function && (sub("kill") || sub("stats")))
}

/// The most a command may add to its tenant's data, as far as its request tells: what it
/// carries, or the string SETRANGE's or SETBIT's offset makes (an offset past Redis's
/// largest string is left to the command's own error). Checked against the tenant's quota
/// before it runs, so that one write cannot land far past it.
pub fn growth_bound(spec: &CommandSpec, argv: &[&[u8]]) -> u64 {
    const LARGEST_STRING: u64 = 512 << 20;
    let carried: u64 = argv.iter().skip(1).map(|a| a.len() as u64).sum();
    let offset = || argv.get(2).and_then(|a| std::str::from_utf8(a).ok()).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let made = match spec.id {
        CommandId::Setrange => offset().saturating_add(argv.get(3).map_or(0, |v| v.len() as u64)),
        CommandId::Setbit => offset() / 8 + 1,
        _ => 0,
    };
    if made <= LARGEST_STRING {
        carried.max(made)
    } else {
        carried
    }
}

/// Redis's BUSY error, naming the command that stops what runs.
pub fn busy_error(function: bool) -> &'static str {
    if function {
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    } else {
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    }
}

impl Refusal {
    /// The error reply, in Redis's words for the origin.
    pub fn error(&self, origin: Origin, spec: Option<&CommandSpec>, argv: &[&[u8]]) -> String {
        let script = matches!(origin, Origin::Script { .. });
        match self {
            Refusal::Unknown if script => "ERR Unknown Redis command called from script".into(),
            Refusal::Unknown => super::super::unknown_command_error(argv),
            Refusal::Arity if script => "ERR Wrong number of args calling Redis command from script".into(),
            Refusal::Arity => super::super::CmdError::WrongArgs(spec.map_or("", |s| s.name)).to_string(),
            Refusal::NoAuth => "NOAUTH Authentication required.".into(),
            Refusal::Denied(d) if script => match d {
                Denied::Command(_) => "ERR The user executing the script can't run this command or subcommand".into(),
                Denied::Key(_) => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments".into(),
                Denied::Channel(_) => "ERR The user executing the script can't publish to the channel mentioned in the command".into(),
            },
            Refusal::Denied(d) => d.error(),
            Refusal::Subscribed => format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.map_or_else(String::new, |s| table::full_name(s, argv))
            ),
            Refusal::Busy(function) => busy_error(*function).into(),
            Refusal::WalPoisoned(why) => format!("MISCONF Errors writing to the WAL ({why}): write commands are refused"),
            Refusal::Oom => "OOM command not allowed when used memory > 'maxmemory'.".into(),
            Refusal::QueueFull(limit) => format!("ERR the transaction's queued commands would pass client-query-buffer-limit ({limit} bytes)"),
            Refusal::NotInMulti => "ERR Command not allowed inside a transaction".into(),
            Refusal::NotInScript => "ERR This Redis command is not allowed from script".into(),
            Refusal::WriteInReadonlyScript => "ERR Write commands are not allowed from read-only scripts.".into(),
            Refusal::DebugNotAllowed => "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a \
                                          local connection, otherwise you need to set this option in the configuration file, and then restart the server."
                .into(),
            Refusal::ReadOnlyReplica => "READONLY You can't write against a read only replica.".into(),
            Refusal::NoReplicas => "NOREPLICAS Not enough good replicas to write.".into(),
            Refusal::Loading => "LOADING Redis is loading the dataset in memory".into(),
            Refusal::Fenced => "TRYAGAIN this engine restarted and waits for its role (REPLICAOF from the coordinator, or REPLICAOF NO ONE)".into(),
            Refusal::NotFromMaster => {
                format!("ERR {} is not applied from a master's replication stream", spec.map_or("", |s| s.name).to_ascii_uppercase())
            }
            Refusal::LeaseLapsed => {
                "TRYAGAIN this primary's term lease ran out (the coordinator renews it; it may have been replaced): the write was not run".into()
            }
            Refusal::NotWithStorage => {
                format!("ERR {} is not supported for a tenant with a storage tier yet", spec.map_or("", |s| s.name).to_ascii_uppercase())
            }
        }
    }

    /// Whether a transaction being queued is aborted by it (EXEC answers EXECABORT).
    pub fn aborts_multi(&self) -> bool {
        matches!(
            self,
            Refusal::Unknown
                | Refusal::Arity
                | Refusal::Denied(_)
                | Refusal::Oom
                | Refusal::QueueFull(_)
                | Refusal::NotInMulti
                | Refusal::DebugNotAllowed
                | Refusal::Busy(_)
                | Refusal::ReadOnlyReplica
                | Refusal::NoReplicas
                | Refusal::Fenced
                | Refusal::LeaseLapsed
                | Refusal::Loading
        )
    }

    /// Whether it counts in the command's `rejected_calls`.
    pub fn counts_rejected(&self) -> bool {
        matches!(
            self,
            Refusal::Arity
                | Refusal::Denied(_)
                | Refusal::Oom
                | Refusal::DebugNotAllowed
                | Refusal::ReadOnlyReplica
                | Refusal::NoReplicas
                | Refusal::LeaseLapsed
        )
    }

    /// Whether it counts in `total_error_replies`.
    pub fn counts_error_reply(&self) -> bool {
        matches!(
            self,
            Refusal::Unknown
                | Refusal::Arity
                | Refusal::Denied(_)
                | Refusal::WalPoisoned(_)
                | Refusal::Oom
                | Refusal::QueueFull(_)
                | Refusal::NotWithStorage
                | Refusal::DebugNotAllowed
                | Refusal::ReadOnlyReplica
                | Refusal::NoReplicas
                | Refusal::LeaseLapsed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::lookup;

    /// A server as admission sees it, with every answer settable.
    #[derive(Default, Debug)]
    struct FakeGate {
        auth_required: bool,
        busy: bool,
        paused_until: Option<i64>,
        poisoned: Option<String>,
        storage_backed: bool,
        full: bool,
        debug: Option<DebugCommand>,
        declared: Option<Declared>,
        replica: bool,
        too_few_replicas: bool,
        fenced: bool,
        loading: bool,
        lapsed: bool,
        /// Bytes the caller's namespace may still take (None: no quota).
        room: Option<u64>,
        /// The transaction bound (None: 1 GB).
        queue_limit: Option<u64>,
    }

    impl Gate for FakeGate {
        fn auth_required(&self) -> bool {
            self.auth_required
        }
        fn script_busy(&self, _ns: usize) -> Option<bool> {
            self.busy.then_some(false)
        }
        fn paused_until(&self, writes: bool, _spec: &CommandSpec) -> Option<i64> {
            self.paused_until.filter(|_| writes)
        }
        fn declared_flags(&self, _spec: &CommandSpec, _ns: usize, _argv: &[&[u8]]) -> Option<Declared> {
            self.declared
        }
        fn over_memory(&self, _ns: usize, incoming: u64) -> bool {
            self.full || !self.namespace_room(0, incoming)
        }
        fn namespace_room(&self, _ns: usize, incoming: u64) -> bool {
            self.room.is_none_or(|room| incoming <= room)
        }
        fn queue_limit(&self) -> u64 {
            self.queue_limit.unwrap_or(1 << 30)
        }
        fn wal_poisoned(&self) -> Option<String> {
            self.poisoned.clone()
        }
        fn storage_backed(&self, _ns: usize) -> bool {
            self.storage_backed
        }
        fn make_room(&self, _ns: usize, incoming: u64) -> bool {
            !self.full && self.namespace_room(0, incoming)
        }
        fn debug_command(&self) -> DebugCommand {
            self.debug.unwrap_or(DebugCommand::Yes)
        }
        fn read_only_replica(&self) -> bool {
            self.replica
        }
        fn too_few_replicas(&self) -> bool {
            self.too_few_replicas
        }
        fn fenced(&self) -> bool {
            self.fenced
        }
        fn loading(&self) -> bool {
            self.loading
        }
        fn lease_lapsed(&self) -> bool {
            self.lapsed
        }
    }

    fn verdict(origin: Origin, caller: &Caller, gate: &FakeGate, argv: &[&str]) -> Verdict {
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let spec = lookup(argv[0]).expect("a known command");
        admit(origin, spec, &argv, caller, gate)
    }

    fn caller(user: &User) -> Caller<'_> {
        Caller {
            authenticated: true,
            in_multi: false,
            multi_writes: false,
            multi_denyoom: false,
            multi_bytes: 0,
            subscribed_resp2: false,
            master: false,
            user,
            namespace: 0,
            peer: "127.0.0.1:5000",
        }
    }

    #[test]
    fn debug_runs_only_where_enable_debug_command_allows() {
        let user = User::default_user();
        let argv = ["debug", "sleep", "0"];
        let no = FakeGate { debug: Some(DebugCommand::No), ..FakeGate::default() };
        let local = FakeGate { debug: Some(DebugCommand::Local), ..FakeGate::default() };
        let remote = Caller { peer: "10.1.2.3:5000", ..caller(&user) };
        let v6 = Caller { peer: "[::1]:5000", ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &caller(&user), &no, &argv), Verdict::Refuse(Refusal::DebugNotAllowed));
        assert_eq!(verdict(Origin::Client, &caller(&user), &local, &argv), Verdict::Run);
        assert_eq!(verdict(Origin::Client, &v6, &local, &argv), Verdict::Run);
        assert_eq!(verdict(Origin::Client, &remote, &local, &argv), Verdict::Refuse(Refusal::DebugNotAllowed));
        assert_eq!(verdict(Origin::Client, &remote, &FakeGate::default(), &argv), Verdict::Run);
        let in_multi = Caller { in_multi: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &in_multi, &no, &argv), Verdict::Refuse(Refusal::DebugNotAllowed));
        assert!(Refusal::DebugNotAllowed.aborts_multi());
        assert!(Refusal::DebugNotAllowed
            .error(Origin::Client, None, &[])
            .starts_with("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\""));
    }

    #[test]
    fn wrong_arity_is_refused_everywhere() {
        let user = User::default_user();
        let gate = FakeGate::default();
        for origin in [Origin::Client, Origin::Exec, Origin::Script { readonly: false, deny_oom: false }] {
            assert_eq!(verdict(origin, &caller(&user), &gate, &["get"]), Verdict::Refuse(Refusal::Arity));
            assert_eq!(verdict(origin, &caller(&user), &gate, &["get", "k"]), Verdict::Run);
        }
        let script = Origin::Script { readonly: false, deny_oom: false };
        assert_eq!(Refusal::Unknown.error(script, None, &[b"nosuch"]), "ERR Unknown Redis command called from script");
        assert!(Refusal::Unknown.error(Origin::Client, None, &[b"nosuch"]).starts_with("ERR unknown command 'nosuch'"));
    }

    #[test]
    fn multi_queues_what_may_be_queued_and_refuses_the_rest() {
        let user = User::default_user();
        let gate = FakeGate::default();
        let c = Caller { in_multi: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &c, &gate, &["set", "k", "v"]), Verdict::Queue { writes: true, denyoom: true });
        assert_eq!(verdict(Origin::Client, &c, &gate, &["get", "k"]), Verdict::Queue { writes: false, denyoom: false });
        assert_eq!(verdict(Origin::Client, &c, &gate, &["publish", "c", "m"]), Verdict::Queue { writes: true, denyoom: false });
        // EXEC of a transaction that may grow memory is refused while memory is full.
        let full = FakeGate { full: true, ..FakeGate::default() };
        let grows = Caller { in_multi: true, multi_denyoom: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &grows, &full, &["exec"]), Verdict::Refuse(Refusal::Oom));
        assert_eq!(verdict(Origin::Client, &c, &full, &["exec"]), Verdict::Run);
        assert_eq!(verdict(Origin::Client, &c, &gate, &["exec"]), Verdict::Run);
        assert_eq!(verdict(Origin::Client, &c, &gate, &["watch", "k"]), Verdict::Run);
        let refused = verdict(Origin::Client, &c, &gate, &["terrace.namespace", "t"]);
        assert_eq!(refused, Verdict::Refuse(Refusal::NotInMulti));
        assert!(Refusal::NotInMulti.aborts_multi());
        // EXEC runs what it queued, whatever the connection's MULTI state says.
        assert_eq!(verdict(Origin::Exec, &c, &gate, &["set", "k", "v"]), Verdict::Run);
    }

    /// Finding 8 of issue 47: a replica obeyed SHUTDOWN NOSAVE arriving in its master's stream.
    #[test]
    fn a_masters_stream_applies_writes_not_administration() {
        let user = User::default_user();
        let master = Caller { master: true, ..caller(&user) };
        let gate = FakeGate::default();
        for refused in [&["shutdown", "nosave"][..], &["config", "set", "maxmemory", "1"], &["replicaof", "no", "one"], &["debug", "sleep", "1"]] {
            assert_eq!(verdict(Origin::Client, &master, &gate, refused), Verdict::Refuse(Refusal::NotFromMaster), "{refused:?}");
        }
        for applied in [&["set", "k", "v"][..], &["select", "1"], &["terrace.dropnamespace", "t"], &["ping"], &["multi"]] {
            assert_eq!(verdict(Origin::Client, &master, &gate, applied), Verdict::Run, "{applied:?}");
        }
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["debug", "sleep", "0"]), Verdict::Run, "a client's is its own business");
    }

    /// Finding 3 of issue 47: a write is checked against the room its request needs, not
    /// only against whether the tenant is already over its quota.
    #[test]
    fn a_write_larger_than_the_room_left_is_refused_before_it_runs() {
        let user = User::default_user();
        let gate = FakeGate { room: Some(1000), ..FakeGate::default() };
        let c = caller(&user);
        let big = "x".repeat(2000);
        assert_eq!(verdict(Origin::Client, &c, &gate, &["set", "k", "v"]), Verdict::Run);
        assert_eq!(verdict(Origin::Client, &c, &gate, &["set", "k", &big]), Verdict::Refuse(Refusal::Oom));
        assert_eq!(verdict(Origin::Client, &c, &gate, &["setrange", "k", "5000", "v"]), Verdict::Refuse(Refusal::Oom));
        assert_eq!(verdict(Origin::Client, &c, &gate, &["setbit", "k", "80000", "1"]), Verdict::Refuse(Refusal::Oom));
        // (An offset past the largest string is the command's own error.)
        assert_eq!(verdict(Origin::Client, &c, &gate, &["setrange", "k", "999999999999", "v"]), Verdict::Run);
        // Reads of any size are not writes.
        assert_eq!(verdict(Origin::Client, &c, &gate, &["get", &big]), Verdict::Run);
        let script = Origin::Script { readonly: false, deny_oom: true };
        assert_eq!(verdict(script, &c, &gate, &["set", "k", &big]), Verdict::Refuse(Refusal::Oom));
        assert_eq!(growth_bound(lookup(b"set").unwrap(), &[b"set", b"key", b"value"]), 8);
    }

    /// Finding 4: a transaction's queue is bounded, and what it holds counts in the quota.
    #[test]
    fn a_queued_command_past_the_bound_or_the_quota_is_refused_and_aborts() {
        let user = User::default_user();
        let c = Caller { in_multi: true, multi_bytes: 900, ..caller(&user) };
        let bounded = FakeGate { queue_limit: Some(1000), ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &c, &bounded, &["get", "k"]), Verdict::Queue { writes: false, denyoom: false });
        let refused = verdict(Origin::Client, &c, &bounded, &["get", &"k".repeat(100)]);
        assert_eq!(refused, Verdict::Refuse(Refusal::QueueFull(1000)));
        assert!(Refusal::QueueFull(1000).aborts_multi());
        let tight = FakeGate { room: Some(50), ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &c, &tight, &["get", &"k".repeat(100)]), Verdict::Refuse(Refusal::Oom));
        // The master's stream is never refused.
        let master = Caller { master: true, ..c };
        assert_eq!(verdict(Origin::Client, &master, &bounded, &["get", &"k".repeat(100)]), Verdict::Queue { writes: false, denyoom: false });
    }

    #[test]
    fn authentication_busy_scripts_and_pause_apply_to_clients_only() {
        let user = User::default_user();
        let gate = FakeGate { auth_required: true, ..FakeGate::default() };
        let anonymous = Caller { authenticated: false, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &anonymous, &gate, &["get", "k"]), Verdict::Refuse(Refusal::NoAuth));
        assert_eq!(verdict(Origin::Client, &anonymous, &gate, &["auth", "pw"]), Verdict::Run);
        let open = FakeGate::default();
        assert_eq!(verdict(Origin::Client, &anonymous, &open, &["get", "k"]), Verdict::Run);

        let busy = FakeGate { busy: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &caller(&user), &busy, &["get", "k"]), Verdict::Refuse(Refusal::Busy(false)));
        assert_eq!(verdict(Origin::Client, &caller(&user), &busy, &["script", "kill"]), Verdict::Run);
        assert_eq!(verdict(Origin::Script { readonly: false, deny_oom: false }, &caller(&user), &busy, &["get", "k"]), Verdict::Run);

        let paused = FakeGate { paused_until: Some(42), ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &caller(&user), &paused, &["set", "k", "v"]), Verdict::Pause(42));
        assert_eq!(verdict(Origin::Client, &caller(&user), &paused, &["get", "k"]), Verdict::Run);
        assert_eq!(verdict(Origin::Exec, &caller(&user), &paused, &["set", "k", "v"]), Verdict::Run);
    }

    #[test]
    fn pause_write_holds_what_writes_or_may_replicate() {
        let user = User::default_user();
        let paused = FakeGate { paused_until: Some(42), ..FakeGate::default() };
        let c = caller(&user);
        // PFCOUNT and PUBLISH may replicate; EVAL without a shebang may too.
        assert_eq!(verdict(Origin::Client, &c, &paused, &["pfcount", "h"]), Verdict::Pause(42));
        assert_eq!(verdict(Origin::Client, &c, &paused, &["publish", "c", "m"]), Verdict::Pause(42));
        assert_eq!(verdict(Origin::Client, &c, &paused, &["eval", "return 1", "0"]), Verdict::Pause(42));
        assert_eq!(verdict(Origin::Client, &c, &paused, &["eval_ro", "return 1", "0"]), Verdict::Run);
        // A script that declared no-writes is not held.
        let ro_script =
            FakeGate { declared: Some(Declared { no_writes: true, ..Declared::default() }), ..FakeGate { paused_until: Some(42), ..FakeGate::default() } };
        assert_eq!(verdict(Origin::Client, &c, &ro_script, &["eval", "#!lua flags=no-writes\nreturn 1", "0"]), Verdict::Run);
        // EXEC is held only for a transaction that writes.
        let reads = Caller { in_multi: true, ..caller(&user) };
        let writes = Caller { in_multi: true, multi_writes: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &reads, &paused, &["exec"]), Verdict::Run);
        assert_eq!(verdict(Origin::Client, &writes, &paused, &["exec"]), Verdict::Pause(42));
    }

    #[test]
    fn scripts_are_refused_for_memory_by_their_declared_flags() {
        let user = User::default_user();
        let c = caller(&user);
        let full = FakeGate { full: true, ..FakeGate::default() };
        // Without a shebang EVAL runs; the commands inside that may grow memory are refused.
        assert_eq!(verdict(Origin::Client, &c, &full, &["eval", "return 1", "0"]), Verdict::Run);
        let compat = Origin::Script { readonly: false, deny_oom: true };
        assert_eq!(verdict(compat, &c, &full, &["set", "k", "v"]), Verdict::Refuse(Refusal::Oom));
        assert_eq!(verdict(compat, &c, &full, &["get", "k"]), Verdict::Run);
        // Declared flags without allow-oom: the script itself is refused.
        let declared = FakeGate { declared: Some(Declared::default()), full: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &c, &declared, &["eval", "#!lua\nreturn 1", "0"]), Verdict::Refuse(Refusal::Oom));
        let allow = FakeGate { declared: Some(Declared { allow_oom: true, ..Declared::default() }), full: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &c, &allow, &["eval", "#!lua flags=allow-oom\nreturn 1", "0"]), Verdict::Run);
    }

    #[test]
    fn subscribed_resp2_clients_may_only_subscribe_and_ping() {
        let user = User::default_user();
        let c = Caller { subscribed_resp2: true, ..caller(&user) };
        let gate = FakeGate::default();
        assert_eq!(verdict(Origin::Client, &c, &gate, &["get", "k"]), Verdict::Refuse(Refusal::Subscribed));
        assert_eq!(verdict(Origin::Client, &c, &gate, &["ping"]), Verdict::Run);
        let argv: [&[u8]; 2] = [b"get", b"k"];
        assert!(Refusal::Subscribed.error(Origin::Client, lookup(b"get"), &argv).starts_with("ERR Can't execute 'get'"));
    }

    #[test]
    fn acl_rules_are_checked_in_every_origin_with_its_words() {
        let mut user = User::new("alice");
        for rule in ["on", "nopass", "+get", "~k*"] {
            user.apply(rule).unwrap();
        }
        let gate = FakeGate::default();
        for origin in [Origin::Client, Origin::Exec, Origin::Script { readonly: false, deny_oom: false }] {
            assert_eq!(verdict(origin, &caller(&user), &gate, &["get", "k1"]), Verdict::Run);
            let Verdict::Refuse(r @ Refusal::Denied(_)) = verdict(origin, &caller(&user), &gate, &["set", "k1", "v"]) else { panic!("SET allowed") };
            assert!(r.aborts_multi() && r.counts_rejected());
            let Verdict::Refuse(key @ Refusal::Denied(_)) = verdict(origin, &caller(&user), &gate, &["get", "other"]) else { panic!("key allowed") };
            if origin == Origin::Client {
                assert!(key.error(origin, None, &[]).starts_with("NOPERM"));
            } else if origin != Origin::Exec {
                assert!(key.error(origin, None, &[]).contains("can't access at least one of the keys"));
            }
        }
    }

    #[test]
    fn a_poisoned_wal_refuses_writes_from_every_origin() {
        let user = User::default_user();
        let gate = FakeGate { poisoned: Some("disk full".into()), ..FakeGate::default() };
        for origin in [Origin::Client, Origin::Exec, Origin::Script { readonly: false, deny_oom: false }] {
            assert_eq!(verdict(origin, &caller(&user), &gate, &["set", "k", "v"]), Verdict::Refuse(Refusal::WalPoisoned("disk full".into())));
            assert_eq!(verdict(origin, &caller(&user), &gate, &["get", "k"]), Verdict::Run);
        }
    }

    #[test]
    fn memory_admission_refuses_growth_but_not_replay() {
        let user = User::default_user();
        let full = FakeGate { full: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &caller(&user), &full, &["set", "k", "v"]), Verdict::Refuse(Refusal::Oom));
        assert_eq!(verdict(Origin::Client, &caller(&user), &full, &["del", "k"]), Verdict::Run);
        assert_eq!(verdict(Origin::Replay, &caller(&user), &full, &["set", "k", "v"]), Verdict::Run);
    }

    #[test]
    fn a_lapsed_lease_refuses_clients_writes_but_not_reads_the_masters_stream_or_replay() {
        let user = User::default_user();
        let gate = FakeGate { lapsed: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["set", "k", "v"]), Verdict::Refuse(Refusal::LeaseLapsed));
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["publish", "c", "m"]), Verdict::Refuse(Refusal::LeaseLapsed));
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["get", "k"]), Verdict::Run);
        let exec = Caller { in_multi: true, multi_writes: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &exec, &gate, &["exec"]), Verdict::Refuse(Refusal::LeaseLapsed));
        let queuing = Caller { in_multi: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &queuing, &gate, &["set", "k", "v"]), Verdict::Refuse(Refusal::LeaseLapsed));
        assert!(Refusal::LeaseLapsed.aborts_multi());
        let master = Caller { master: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &master, &gate, &["set", "k", "v"]), Verdict::Run);
        assert_eq!(verdict(Origin::Replay, &caller(&user), &gate, &["set", "k", "v"]), Verdict::Run);
        // Inside a transaction or script admitted before it lapsed: run whole.
        assert_eq!(verdict(Origin::Exec, &caller(&user), &gate, &["set", "k", "v"]), Verdict::Run);
        assert!(Refusal::LeaseLapsed.error(Origin::Client, None, &[]).starts_with("TRYAGAIN "));
    }

    #[test]
    fn replay_runs_whatever_the_engines_role_acl_or_pause_say() {
        // A fenced restart replays its log (a refused record is an acknowledged write lost),
        // and neither a restricted default user, a replica's role nor a pause holds it.
        let mut user = User::new("default");
        user.apply("on").expect("a rule");
        let unauthenticated = Caller { authenticated: false, ..caller(&user) };
        for gate in [
            FakeGate { auth_required: true, ..FakeGate::default() },
            FakeGate { fenced: true, ..FakeGate::default() },
            FakeGate { loading: true, ..FakeGate::default() },
            FakeGate { replica: true, ..FakeGate::default() },
            FakeGate { too_few_replicas: true, ..FakeGate::default() },
            FakeGate { paused_until: Some(i64::MAX), ..FakeGate::default() },
            FakeGate { busy: true, ..FakeGate::default() },
            FakeGate { full: true, ..FakeGate::default() },
            FakeGate { lapsed: true, ..FakeGate::default() },
        ] {
            assert_eq!(verdict(Origin::Replay, &unauthenticated, &gate, &["set", "k", "v"]), Verdict::Run, "{gate:?}");
        }
        let fenced = FakeGate { fenced: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &caller(&User::default_user()), &fenced, &["set", "k", "v"]), Verdict::Refuse(Refusal::Fenced));
    }

    #[test]
    fn scripts_refuse_noscript_commands_and_read_only_scripts_refuse_writes() {
        let user = User::default_user();
        let gate = FakeGate::default();
        let ro = Origin::Script { readonly: true, deny_oom: false };
        assert_eq!(verdict(ro, &caller(&user), &gate, &["set", "k", "v"]), Verdict::Refuse(Refusal::WriteInReadonlyScript));
        assert_eq!(verdict(ro, &caller(&user), &gate, &["get", "k"]), Verdict::Run);
        for noscript in [&["multi"][..], &["terrace.workload", "default"], &["terrace.namespace", "t"], &["eval", "return 1", "0"]] {
            assert_eq!(
                verdict(Origin::Script { readonly: false, deny_oom: false }, &caller(&user), &gate, noscript),
                Verdict::Refuse(Refusal::NotInScript),
                "{noscript:?}"
            );
        }
    }

    #[test]
    fn storage_backed_tenants_refuse_whole_database_commands() {
        let user = User::default_user();
        let gate = FakeGate { storage_backed: true, ..FakeGate::default() };
        for origin in [Origin::Client, Origin::Exec, Origin::Script { readonly: false, deny_oom: false }] {
            assert_eq!(verdict(origin, &caller(&user), &gate, &["flushall"]), Verdict::Refuse(Refusal::NotWithStorage));
        }
        assert_eq!(
            Refusal::NotWithStorage.error(Origin::Client, lookup(b"flushall"), &[b"flushall"]),
            "ERR FLUSHALL is not supported for a tenant with a storage tier yet"
        );
    }

    #[test]
    fn a_replica_refuses_its_clients_writes_but_not_the_masters_stream() {
        let user = User::default_user();
        let gate = FakeGate { replica: true, paused_until: Some(i64::MAX), ..FakeGate::default() };
        let readonly = Verdict::Refuse(Refusal::ReadOnlyReplica);
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["set", "k", "v"]), readonly);
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["get", "k"]), Verdict::Run);
        assert_eq!(verdict(Origin::Script { readonly: false, deny_oom: false }, &caller(&user), &gate, &["del", "k"]), readonly);
        let queued = Caller { in_multi: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &queued, &gate, &["incr", "k"]), readonly);
        assert!(Refusal::ReadOnlyReplica.aborts_multi(), "EXEC answers EXECABORT after it");
        // The link's own connection writes, and CLIENT PAUSE does not hold it; nor do ACL
        // rules, full memory or a busy script refuse what the master sent.
        let master = Caller { master: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &master, &gate, &["set", "k", "v"]), Verdict::Run);
        let strict = Caller { master: true, user: &User::new("strict"), ..caller(&user) };
        let hard = FakeGate { replica: true, full: true, busy: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &strict, &hard, &["set", "k", "v"]), Verdict::Run);
        let not_master = Caller { master: false, ..strict };
        assert!(matches!(verdict(Origin::Client, &not_master, &FakeGate::default(), &["set", "k", "v"]), Verdict::Refuse(Refusal::Denied(_))));
        assert_eq!(Refusal::ReadOnlyReplica.error(Origin::Client, lookup(b"set"), &[b"set"]), "READONLY You can't write against a read only replica.");
    }

    #[test]
    fn min_replicas_to_write_refuses_writes_and_scripts_that_may_write() {
        let user = User::default_user();
        let gate = FakeGate { too_few_replicas: true, ..FakeGate::default() };
        let refused = Verdict::Refuse(Refusal::NoReplicas);
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["set", "k", "v"]), refused);
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["get", "k"]), Verdict::Run);
        assert_eq!(verdict(Origin::Script { readonly: false, deny_oom: false }, &caller(&user), &gate, &["set", "k", "v"]), refused);
        let queued = Caller { in_multi: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &queued, &gate, &["incr", "k"]), refused);
        assert!(Refusal::NoReplicas.aborts_multi());
        let declared_writes = FakeGate { declared: Some(Declared { no_writes: false, ..Declared::default() }), ..gate };
        assert_eq!(verdict(Origin::Client, &caller(&user), &declared_writes, &["eval", "#!lua\nreturn 1", "0"]), refused, "a shebang without no-writes");
        let master = Caller { master: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &master, &FakeGate { too_few_replicas: true, ..FakeGate::default() }, &["set", "k", "v"]), Verdict::Run);
        assert_eq!(Refusal::NoReplicas.error(Origin::Client, lookup(b"set"), &[b"set"]), "NOREPLICAS Not enough good replicas to write.");
    }

    #[test]
    fn a_fenced_engine_answers_only_what_a_masterless_replica_does() {
        let user = User::default_user();
        let gate = FakeGate { fenced: true, ..FakeGate::default() };
        for argv in [&["get", "k"][..], &["set", "k", "v"], &["dbsize"]] {
            assert_eq!(verdict(Origin::Client, &caller(&user), &gate, argv), Verdict::Refuse(Refusal::Fenced), "{argv:?}");
        }
        for argv in [&["info"][..], &["ping"], &["replicaof", "no", "one"], &["role"], &["config", "get", "port"]] {
            assert_eq!(verdict(Origin::Client, &caller(&user), &gate, argv), Verdict::Run, "{argv:?}");
        }
        let master = Caller { master: true, ..caller(&user) };
        assert_eq!(verdict(Origin::Client, &master, &gate, &["set", "k", "v"]), Verdict::Run, "the master's stream");
        assert!(Refusal::Fenced.error(Origin::Client, lookup(b"get"), &[b"get"]).starts_with("TRYAGAIN "));
    }

    #[test]
    fn a_replica_loading_its_masters_snapshot_answers_loading() {
        let user = User::default_user();
        let gate = FakeGate { loading: true, ..FakeGate::default() };
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["get", "k"]), Verdict::Refuse(Refusal::Loading));
        assert_eq!(verdict(Origin::Client, &caller(&user), &gate, &["info"]), Verdict::Run, "INFO is a loading command");
        assert_eq!(Refusal::Loading.error(Origin::Client, lookup(b"get"), &[b"get"]), "LOADING Redis is loading the dataset in memory");
    }
}
