//! Dictionary files: one per tenant generation, `<data-dir>/compression/<tenant>/gen-<N>.dict`,
//! written to a temporary name, fsynced and renamed, so a crash leaves either the old set or
//! the new one. The tenant's settings sit beside them in `tenant.json`, and `GENERATIONS`
//! lists the generations values may use (written before a generation is used and after one
//! is dropped), so a dictionary file that goes missing is noticed at start.
//!
//! ```text
//! "TRCDICT1"  magic
//! u8          codec (1 zstd, 2 zstd-dict, 3 pattern)
//! u32 LE      generation
//! u64 LE      payload length
//! payload     the codec's trained state
//! u32 LE      CRC32 of everything before it
//! ```

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{CodecError, CodecKind};

const MAGIC: &[u8; 8] = b"TRCDICT1";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("tenant '{tenant}': dictionary file {path}: {reason}")]
    Corrupt { tenant: String, path: String, reason: String },
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.display().to_string(), source }
}

/// One dictionary read back from disk.
pub struct StoredDictionary {
    pub generation: u32,
    pub kind: CodecKind,
    pub payload: Vec<u8>,
    pub path: PathBuf,
}

/// The directory of a tenant's files ("default" for the default namespace).
pub fn tenant_dir(root: &Path, tenant: &str) -> PathBuf {
    root.join(if tenant.is_empty() { "default" } else { tenant })
}

fn file_name(generation: u32) -> String {
    format!("gen-{generation}.dict")
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync of the directory).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().expect("files live in a directory");
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    fs::rename(&tmp, path).map_err(io(path))?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Persists one generation's dictionary.
pub fn save(root: &Path, tenant: &str, generation: u32, kind: CodecKind, payload: &[u8]) -> Result<PathBuf, StoreError> {
    let mut buf = Vec::with_capacity(payload.len() + 25);
    buf.extend_from_slice(MAGIC);
    buf.push(kind as u8);
    buf.extend_from_slice(&generation.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    buf.extend_from_slice(payload);
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    let path = tenant_dir(root, tenant).join(file_name(generation));
    write_atomic(&path, &buf)?;
    Ok(path)
}

/// Records which generations values may use.
pub fn save_manifest(root: &Path, tenant: &str, generations: &[u32]) -> Result<(), StoreError> {
    let text: Vec<String> = generations.iter().map(|g| g.to_string()).collect();
    write_atomic(&tenant_dir(root, tenant).join(MANIFEST), format!("{}\n", text.join(" ")).as_bytes())
}

const MANIFEST: &str = "GENERATIONS";

/// Removes a generation's file (its values have all been re-encoded).
pub fn remove(root: &Path, tenant: &str, generation: u32) {
    let _ = fs::remove_file(tenant_dir(root, tenant).join(file_name(generation)));
}

fn parse(tenant: &str, path: &Path, bytes: &[u8]) -> Result<StoredDictionary, StoreError> {
    let corrupt = |reason: &str| StoreError::Corrupt { tenant: tenant.to_string(), path: path.display().to_string(), reason: reason.to_string() };
    if bytes.len() < MAGIC.len() + 1 + 4 + 8 + 4 || &bytes[..8] != MAGIC {
        return Err(corrupt("not a Terrace dictionary file (bad magic or too short)"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(corrupt("checksum mismatch (the file is damaged)"));
    }
    let kind = CodecKind::from_bits(body[8]).ok_or_else(|| corrupt("unknown codec"))?;
    let generation = u32::from_le_bytes(body[9..13].try_into().expect("4 bytes"));
    let len = u64::from_le_bytes(body[13..21].try_into().expect("8 bytes")) as usize;
    if body.len() != 21 + len {
        return Err(corrupt("payload length does not match the file size"));
    }
    Ok(StoredDictionary { generation, kind, payload: body[21..].to_vec(), path: path.to_path_buf() })
}

/// Every tenant directory under `root` with its dictionaries, oldest generation first. A file
/// that cannot be read or parsed is an error naming the tenant and the file.
pub fn load_all(root: &Path) -> Result<Vec<(String, Vec<StoredDictionary>)>, StoreError> {
    let mut out = Vec::new();
    let Ok(dirs) = fs::read_dir(root) else { return Ok(out) };
    for d in dirs.flatten() {
        if !d.path().is_dir() {
            continue;
        }
        let tenant = d.file_name().to_string_lossy().to_string();
        let mut gens = Vec::new();
        for f in fs::read_dir(d.path()).map_err(io(&d.path()))?.flatten() {
            let path = f.path();
            let name = f.file_name().to_string_lossy().to_string();
            let Some(number) = name.strip_prefix("gen-").and_then(|n| n.strip_suffix(".dict")) else { continue };
            let bytes = fs::read(&path).map_err(io(&path))?;
            let dict = parse(&tenant, &path, &bytes)?;
            if number.parse::<u32>().ok() != Some(dict.generation) {
                return Err(StoreError::Corrupt { tenant, path: path.display().to_string(), reason: "generation differs from the file name".into() });
            }
            gens.push(dict);
        }
        gens.sort_by_key(|g| g.generation);
        let manifest = d.path().join(MANIFEST);
        if let Ok(text) = fs::read_to_string(&manifest) {
            for n in text.split_whitespace() {
                let n: u32 = n.parse().map_err(|_| StoreError::Corrupt {
                    tenant: tenant.clone(),
                    path: manifest.display().to_string(),
                    reason: format!("'{n}' is not a generation number"),
                })?;
                if !gens.iter().any(|g| g.generation == n) {
                    return Err(StoreError::Corrupt {
                        tenant,
                        path: d.path().join(file_name(n)).display().to_string(),
                        reason: format!("missing, though {MANIFEST} lists generation {n}"),
                    });
                }
            }
        }
        out.push((tenant, gens));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

impl From<(String, PathBuf, CodecError)> for StoreError {
    fn from((tenant, path, e): (String, PathBuf, CodecError)) -> StoreError {
        StoreError::Corrupt { tenant, path: path.display().to_string(), reason: e.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_dictionaries_load_and_damage_is_named() {
        let root = std::env::temp_dir().join(format!("terrace-store-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        save(&root, "shop", 3, CodecKind::ZstdDict, b"dictionary bytes").unwrap();
        save(&root, "shop", 1, CodecKind::Pattern, b"older").unwrap();
        save(&root, "", 1, CodecKind::Zstd, b"").unwrap();
        let all = load_all(&root).unwrap();
        assert_eq!(all.len(), 2);
        let (name, gens) = &all[1];
        assert_eq!(name, "shop");
        assert_eq!(gens.iter().map(|g| g.generation).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(gens[1].payload, b"dictionary bytes");
        assert_eq!(gens[1].kind, CodecKind::ZstdDict);
        let path = tenant_dir(&root, "shop").join("gen-3.dict");
        let mut bytes = fs::read(&path).unwrap();
        bytes[20] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let e = load_all(&root).err().expect("a damaged file is an error").to_string();
        assert!(e.contains("tenant 'shop'") && e.contains("gen-3.dict") && e.contains("checksum"), "{e}");
        fs::write(&path, b"TRCD").unwrap();
        assert!(load_all(&root).err().unwrap().to_string().contains("bad magic"));
        save(&root, "shop", 3, CodecKind::ZstdDict, b"dictionary bytes").unwrap();
        save_manifest(&root, "shop", &[1, 3]).unwrap();
        assert_eq!(load_all(&root).unwrap()[1].1.len(), 2);
        remove(&root, "shop", 3);
        let e = load_all(&root).err().expect("a listed file that is gone is an error").to_string();
        assert!(e.contains("tenant 'shop'") && e.contains("gen-3.dict") && e.contains("missing"), "{e}");
        save_manifest(&root, "shop", &[1]).unwrap();
        assert_eq!(load_all(&root).unwrap()[1].1.len(), 1);
        let _ = fs::remove_dir_all(&root);
    }
}
