//! Small files of the data directory replaced whole and durably (the namespace list, the
//! slots given away): written to a temporary file, synced, renamed over the old one, the
//! directory synced, so a crash leaves the old contents or the new, never a mix.

use std::io::Write;
use std::path::Path;

/// Replaces `dir/name` with `contents`, durably.
pub fn replace_durably(dir: &Path, name: &str, contents: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replaced_file_holds_the_new_contents_and_no_temporary_is_left() {
        let dir = std::env::temp_dir().join(format!("terrace-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        super::replace_durably(&dir, "f", b"one").unwrap();
        super::replace_durably(&dir, "f", b"two").unwrap();
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"two");
        assert!(!dir.join("f.tmp").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
