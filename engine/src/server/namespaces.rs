//! The tenant namespaces' names in order of creation (`DATA_DIR/namespaces`, one per line,
//! the first, empty, being the default namespace). A namespace's number is its place in
//! this list: records in the WAL and keys in storage are found by it. Snapshots and the WAL
//! also carry the names, but the WAL may be pruned without a snapshot (write-back), so the
//! list is kept here too, written durably before a new namespace is used.

use std::path::{Path, PathBuf};

pub use terrace_commands::settings::valid_name;

const FILE: &str = "namespaces";

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
