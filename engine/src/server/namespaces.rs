//! The tenant namespaces' names in order of creation (`DATA_DIR/namespaces`, one per line,
//! the first, empty, being the default namespace). A namespace's number is its place in
//! this list: records in the WAL and keys in storage are found by it. Snapshots and the WAL
//! also carry the names, but the WAL may be pruned without a snapshot (write-back), so the
//! list is kept here too, written durably before a new namespace is used.

use std::path::{Path, PathBuf};

pub use terrace_commands::settings::valid_name;

const FILE: &str = "namespaces";

/// The place of a dropped namespace (`TERRACE.DROPNAMESPACE`): not a valid tenant name (so
/// no lookup finds it), kept so the numbers after it stay; the next new tenant takes it.
pub use terrace_commands::settings::DROPPED_NAMESPACE as DROPPED;

/// Where a new namespace goes in `names`: the first dropped place, else the end.
pub fn first_free(names: &[String]) -> usize {
    names.iter().position(|n| n == DROPPED).unwrap_or(names.len())
}

/// Whether `name` (an entry of the list) is a tenant's, not a dropped place.
pub fn is_live(name: &str) -> bool {
    name != DROPPED
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The names recorded in `data_dir`, if the file exists.
pub fn load(data_dir: &Path) -> std::io::Result<Option<Vec<String>>> {
    match std::fs::read_to_string(path(data_dir)) {
        Ok(text) => Ok(Some(text.lines().map(str::to_string).collect())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces the file with `names`, durably.
pub fn save(data_dir: &Path, names: &[String]) -> std::io::Result<()> {
    let text: String = names.iter().map(|n| format!("{n}\n")).collect();
    crate::files::replace_durably(data_dir, FILE, text.as_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_new_namespace_takes_the_first_dropped_place() {
        let names: Vec<String> = ["", "shop", super::DROPPED, "blog", super::DROPPED].iter().map(|s| s.to_string()).collect();
        assert_eq!(super::first_free(&names), 2);
        assert_eq!(super::first_free(&names[..2]), 2, "none dropped: at the end");
        assert!(!super::valid_name(super::DROPPED), "no tenant can be named as a dropped place");
    }

    #[test]
    fn names_round_trip_with_the_default_first() {
        let dir = std::env::temp_dir().join(format!("terrace-ns-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(super::load(&dir).unwrap(), None);
        let names = vec![String::new(), "shop".to_string(), "blog".to_string()];
        super::save(&dir, &names).unwrap();
        assert_eq!(super::load(&dir).unwrap(), Some(names));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
