//! How the proxy handles each Redis command: answered by the proxy itself, sent to the engine
//! owning its keys, split per engine, sent to every engine, or refused.

use terrace_commands::table::{key_positions, Combine, CommandId, CommandSpec, KeysFrom, Route};

use crate::merge::Merge;
use crate::slots::SlotMap;

/// The proxy's names for the table's routing kinds: a command answered from the
/// connection's state is handled locally, a transaction step is a `Txn`.
pub use terrace_commands::table::{Connection as Local, Split, Transaction as Txn};

#[derive(Debug, Clone)]
pub enum Kind {
    Local(Local),
    /// To the engine owning the keys (engine 0 when there are none).
    Keyed,
    Split(Split),
    /// The request as it is, to every engine.
    FanOut(Merge),
    Scan,
    Info,
    /// Keyed, on a connection of the client's own, without the reply timeout.
    Blocking,
    Txn(Txn),
    /// SUBSCRIBE & co.: the client's connection becomes a relay to one engine.
    Subscribe,
    /// WAIT: to each engine the client wrote to since its last WAIT, on its own connections.
    Wait,
    /// SCRIPT KILL, FUNCTION KILL: to every engine on a new connection (an engine busy in a
    /// script serves only connections opened since), answered if one engine took it.
    Kill,
    Refused(&'static str),
}

fn sub(argv: &[&[u8]]) -> String {
    argv.get(1).map(|s| String::from_utf8_lossy(s).to_ascii_lowercase()).unwrap_or_default()
}

fn merge_of(c: Combine) -> Merge {
    match c {
        Combine::Sum => Merge::Sum,
        Combine::AllOk => Merge::AllOk,
        Combine::AnyOk => Merge::AnyOk,
        Combine::Concat => Merge::Concat,
        Combine::FirstNonNull => Merge::FirstNonNull,
    }
}

/// Classifies a call to `spec`: its route in the table, or for the commands routed by their
/// arguments, what those say.
pub fn classify(spec: &CommandSpec, argv: &[&[u8]]) -> Kind {
    match spec.route {
        Route::Keyed => Kind::Keyed,
        Route::Connection(c) => Kind::Local(c),
        Route::Split(s) => Kind::Split(s),
        Route::FanOut(c) => Kind::FanOut(merge_of(c)),
        Route::Scan => Kind::Scan,
        Route::Info => Kind::Info,
        Route::Blocking => Kind::Blocking,
        Route::Wait => Kind::Wait,
        Route::Transaction(t) => Kind::Txn(t),
        Route::Subscribe => Kind::Subscribe,
        Route::EngineOnly if spec.id == CommandId::Monitor => Kind::Refused("MONITOR is not supported through the Terrace proxy; run it on an engine"),
        Route::EngineOnly => Kind::Refused("this command is not supported through the Terrace proxy; run it on an engine"),
        Route::ByArguments => by_arguments(spec, argv),
    }
}

/// CLIENT, CONFIG, SCRIPT, FUNCTION, XREAD and XREADGROUP: the kind their arguments give.
fn by_arguments(spec: &CommandSpec, argv: &[&[u8]]) -> Kind {
    match spec.id {
        CommandId::Client => match sub(argv).as_str() {
            "id" | "setname" | "getname" | "setinfo" | "info" | "list" | "no-evict" | "no-touch" | "help" => Kind::Local(Local::Client),
            _ => Kind::Refused("this CLIENT subcommand is not supported through the Terrace proxy"),
        },
        CommandId::Config if matches!(sub(argv).as_str(), "set" | "resetstat") => Kind::FanOut(Merge::AllOk),
        CommandId::Script | CommandId::Function => match sub(argv).as_str() {
            "load" | "flush" | "delete" | "restore" => Kind::FanOut(Merge::AllOk),
            "kill" => Kind::Kill,
            _ => Kind::Keyed,
        },
        CommandId::Xread | CommandId::Xreadgroup if argv.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK")) => Kind::Blocking,
        _ => Kind::Keyed,
    }
}

/// A multi-key command split per engine: each part's engine and sub-request arguments, and
/// for each key of the original call (in order) its (part, index among that part's keys).
#[derive(Debug, PartialEq)]
pub struct SplitPlan<'a> {
    pub parts: Vec<(usize, Vec<&'a [u8]>)>,
    pub positions: Vec<(u16, u32)>,
}

/// Splits MGET/MSET/DEL & co. by engine; `None` when every key is on one engine (the call is
/// then sent as it is). MSET's arguments go in key/value pairs.
pub fn plan_split<'a>(s: Split, argv: &[&'a [u8]], map: &SlotMap) -> Option<SplitPlan<'a>> {
    let step = if s == Split::Mset { 2 } else { 1 };
    let first = map.engine_of_key(argv[1]);
    if (1..argv.len()).step_by(step).all(|i| map.engine_of_key(argv[i]) == first) {
        return None;
    }
    Some(group_by_engine(&argv[..1], &argv[1..], step, map))
}

/// Groups `items` — keys, each followed by `step - 1` values — by the engine of their key;
/// every part's request starts with `head` (the command and any arguments before the keys).
pub fn group_by_engine<'a>(head: &[&'a [u8]], items: &[&'a [u8]], step: usize, map: &SlotMap) -> SplitPlan<'a> {
    let mut parts: Vec<(usize, Vec<&[u8]>)> = Vec::new();
    let mut positions = Vec::with_capacity(items.len() / step);
    for group in items.chunks(step) {
        let e = map.engine_of_key(group[0]);
        let part = match parts.iter().position(|(x, _)| *x == e) {
            Some(p) => p,
            None => {
                parts.push((e, head.to_vec()));
                parts.len() - 1
            }
        };
        let args = &mut parts[part].1;
        positions.push((part as u16, ((args.len() - head.len()) / step) as u32));
        args.extend_from_slice(group);
    }
    SplitPlan { parts, positions }
}

/// Which engine a call's keys live on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// No keys.
    Any,
    One(usize),
    /// Keys on several engines.
    Spans,
}

impl Target {
    fn add(self, engine: usize) -> Target {
        match self {
            Target::Any => Target::One(engine),
            Target::One(e) if e == engine => self,
            _ => Target::Spans,
        }
    }
}

/// The engine of a call's keys. Shard-channel commands route by their channel's slot.
pub fn target(spec: &CommandSpec, argv: &[&[u8]], map: &SlotMap) -> Target {
    if matches!(spec.id, CommandId::Spublish | CommandId::Ssubscribe | CommandId::Sunsubscribe) {
        let channels = if spec.id == CommandId::Spublish { 1 } else { usize::MAX };
        return argv[1..].iter().take(channels).fold(Target::Any, |t, c| t.add(map.engine_of_key(c)));
    }
    // The common case (one key at 1, or a key range) without allocating.
    if spec.keys_from == KeysFrom::Range {
        if spec.first <= 0 {
            return Target::Any;
        }
        let argc = argv.len() as i32;
        let last = if spec.last < 0 { argc + spec.last } else { spec.last.min(argc - 1) };
        let mut t = Target::Any;
        let mut i = spec.first;
        while i <= last && i < argc {
            t = t.add(map.engine_of_key(argv[i as usize]));
            i += spec.step.max(1);
        }
        return t;
    }
    key_positions(spec, argv).into_iter().fold(Target::Any, |t, i| t.add(map.engine_of_key(argv[i])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_commands::lookup;

    fn spec(name: &str) -> &'static CommandSpec {
        lookup(name.as_bytes()).unwrap()
    }

    #[test]
    fn targets_follow_keys() {
        let map = SlotMap::even(2);
        // foo → slot 12182 (engine 1), bar → 5061 (engine 0).
        assert_eq!(target(spec("get"), &[b"get", b"foo"], &map), Target::One(1));
        assert_eq!(target(spec("rename"), &[b"rename", b"foo", b"bar"], &map), Target::Spans);
        assert_eq!(target(spec("rename"), &[b"rename", b"{bar}1", b"bar"], &map), Target::One(0));
        assert_eq!(target(spec("zunionstore"), &[b"zunionstore", b"bar", b"2", b"{bar}a", b"foo"], &map), Target::Spans);
        assert_eq!(target(spec("zunionstore"), &[b"zunionstore", b"bar", b"1", b"{bar}a", b"foo"], &map), Target::One(0));
        assert_eq!(target(spec("ping"), &[b"ping"], &map), Target::Any);
        assert_eq!(target(spec("spublish"), &[b"spublish", b"foo", b"msg"], &map), Target::One(1));
    }

    #[test]
    fn splits_keep_pairs_and_positions() {
        let map = SlotMap::even(2);
        assert_eq!(plan_split(Split::Sum, &[b"del", b"{bar}1", b"bar"], &map), None);
        let plan = plan_split(Split::Mset, &[b"mset", b"foo", b"1", b"bar", b"2", b"{foo}x", b"3"], &map).unwrap();
        assert_eq!(plan.parts, vec![(1, vec![&b"mset"[..], b"foo", b"1", b"{foo}x", b"3"]), (0, vec![&b"mset"[..], b"bar", b"2"])]);
        assert_eq!(plan.positions, vec![(0, 0), (1, 0), (0, 1)]);
    }

    #[test]
    fn classification() {
        assert!(matches!(classify(spec("mget"), &[b"mget", b"a"]), Kind::Split(Split::Mget)));
        assert!(matches!(classify(spec("xread"), &[b"xread", b"block", b"0", b"streams", b"s", b"$"]), Kind::Blocking));
        assert!(matches!(classify(spec("xread"), &[b"xread", b"streams", b"s", b"0"]), Kind::Keyed));
        assert!(matches!(classify(spec("config"), &[b"config", b"SET", b"a", b"b"]), Kind::FanOut(Merge::AllOk)));
        assert!(matches!(classify(spec("config"), &[b"config", b"get", b"a"]), Kind::Keyed));
        assert!(matches!(classify(spec("client"), &[b"client", b"kill"]), Kind::Refused(_)));
    }
}
