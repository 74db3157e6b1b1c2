//! Files mapped into memory at a fixed size: the PMem arena and the WAL's PMem ring. A new
//! (or empty) file is sized; an existing file of another size is refused, never truncated,
//! because it may hold data the caller will want back.

use std::fs::OpenOptions;
use std::path::Path;

use memmap2::MmapRaw;

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("{0}")]
    Open(std::io::Error),
    #[error("has {actual} bytes, not {configured}")]
    WrongSize { configured: u64, actual: u64 },
    #[error("cannot be mapped: {0}")]
    Map(std::io::Error),
}

/// Opens `path` (created if missing) as exactly `size` bytes and maps it shared.
pub fn map_sized(path: &Path, size: u64) -> Result<MmapRaw, MapError> {
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(MapError::Open)?;
    let actual = file.metadata().map_err(MapError::Open)?.len();
    if actual == 0 {
        file.set_len(size).map_err(MapError::Open)?;
    } else if actual != size {
        return Err(MapError::WrongSize { configured: size, actual });
    }
    MmapRaw::map_raw(&file).map_err(MapError::Map)
}
