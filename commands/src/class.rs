//! Statistics classes: the command table's groups folded into the classes the workload
//! statistics count operations by.

/// Command classes (the command table's groups, folded).
pub const CLASSES: [&str; 12] = ["string", "hash", "list", "set", "sortedset", "stream", "bitmap", "hyperloglog", "geo", "keyspace", "scripting", "other"];

/// The class of connection, server, pub/sub and transaction commands.
pub const OTHER: u8 = CLASSES.len() as u8 - 1;

/// The class of a command-table group.
pub fn class_of(group: &str) -> u8 {
    match group {
        "generic" => 9,
        g => CLASSES.iter().position(|c| *c == g).unwrap_or(CLASSES.len() - 1) as u8,
    }
}
