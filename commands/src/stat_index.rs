//! Where a command's statistics are kept (INFO commandstats, LATENCY HISTOGRAM, CLIENT LIST's
//! `cmd=`): its own slot, or — for a container command — its subcommand's, as Redis counts
//! `CLIENT LIST` under `client|list` and never under `client`.

use std::borrow::Cow;

use crate::subcommands::{sub_count, sub_index, sub_name};
use crate::table::{CommandSpec, COMMANDS};

/// How many statistics slots there are: every command, then every subcommand.
pub fn count() -> usize {
    COMMANDS.len() + sub_count()
}

/// The slot a call is counted in.
#[inline]
pub fn of(spec: &CommandSpec, argv: &[&[u8]]) -> usize {
    if spec.subcommands {
        if let Some(i) = argv.get(1).and_then(|sub| sub_index(spec.name, sub)) {
            return COMMANDS.len() + i;
        }
    }
    spec.id.index()
}

/// A slot's name: `get`, or `client|list`.
pub fn name(slot: usize) -> Cow<'static, str> {
    match COMMANDS.get(slot) {
        Some(spec) => Cow::Borrowed(spec.name),
        None => match sub_name(slot - COMMANDS.len()) {
            Some((container, sub)) => Cow::Owned(format!("{container}|{sub}")),
            None => Cow::Borrowed("NULL"),
        },
    }
}

/// The slots a name asks for (LATENCY HISTOGRAM's arguments): a command's own, `c|sub`'s, and
/// for a container all of its subcommands'.
pub fn named(name: &str) -> Vec<usize> {
    let name = name.to_ascii_lowercase();
    if let Some((container, sub)) = name.split_once('|') {
        return sub_index(container, sub.as_bytes()).map(|i| vec![COMMANDS.len() + i]).unwrap_or_default();
    }
    let Some(spec) = COMMANDS.iter().find(|c| c.name == name) else { return Vec::new() };
    let mut slots = vec![spec.id.index()];
    slots.extend((0..sub_count()).filter(|&i| sub_name(i).is_some_and(|(c, _)| c == spec.name)).map(|i| COMMANDS.len() + i));
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_count_per_subcommand() {
        let client = COMMANDS.iter().find(|c| c.name == "client").unwrap();
        let slot = of(client, &[b"CLIENT", b"List"]);
        assert_eq!(name(slot), "client|list");
        assert_eq!(named("client|LIST"), vec![slot]);
        assert!(named("client").contains(&slot));
        let get = COMMANDS.iter().find(|c| c.name == "get").unwrap();
        assert_eq!(name(of(get, &[b"GET", b"k"])), "get");
        assert!(named("nosuch").is_empty());
        assert!(count() > COMMANDS.len());
    }
}
