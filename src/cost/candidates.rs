//! `candidates.toml` for `terrace cost-eval`: prices, the instance shape, how to measure, and
//! the configurations to evaluate, each turned into the flags of a test engine.
//!
//! ```toml
//! [prices]                 # optional; defaults: 1 core + 4 GB = 1 unit, PMem 0.38×, flash 0.017×
//! replication = 1
//! [instance]               # optional; default 1 core, 4 GB DRAM
//! cores = 1
//! dram_gb = 4
//! [measure]                # optional
//! seconds = 2              # per closed-loop step
//! p99_bound_us = 5000   # of a pipelined batch of 8 requests
//! [[candidate]]
//! name = "raw"
//! [[candidate]]
//! name = "zstd-dict"
//! compression = "zstd-dict"
//! [[candidate]]
//! name = "pmem"
//! pmem = true
//! dram_share = 0.2         # DRAM budget for values: this share of the sample's bytes
//! tier_policy = "dram-first"
//! [[candidate]]
//! name = "write-back"
//! storage = "lsm"
//! storage_mode = "write-back"
//! cache_ratio = 0.2
//! ```

use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use terrace_engine::cost::{Instance, Prices};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidates {
    #[serde(default)]
    pub prices: Prices,
    #[serde(default)]
    pub instance: Instance,
    #[serde(default)]
    pub measure: Measure,
    #[serde(rename = "candidate")]
    pub candidates: Vec<Candidate>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Measure {
    pub seconds: f64,
    pub p99_bound_us: f64,
}

impl Default for Measure {
    fn default() -> Measure {
        Measure { seconds: 2.0, p99_bound_us: 5000.0 }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Candidate {
    pub name: String,
    pub compression: Option<String>,
    pub compression_mode: Option<String>,
    pub pmem: bool,
    /// With `pmem`: DRAM budget for values as a share of the sample's bytes.
    pub dram_share: Option<f64>,
    pub tier_policy: Option<String>,
    pub storage: Option<String>,
    pub storage_mode: Option<String>,
    /// With `storage`: the share of the sample the cache keeps.
    pub cache_ratio: Option<f64>,
    pub wal: Option<String>,
    /// The engine's reactor threads (`single`, `N`, `elastic:N`; default `single`). MaxPerf
    /// is per engine CPU-second, so more threads pay only for what they use.
    pub threads: Option<String>,
    /// This candidate's instance shape (default: the file's `[instance]`, with 16 GB of PMem
    /// for `pmem` and 200 GB of flash for `storage` added when it has none).
    pub instance: Option<Instance>,
    /// More engine flags, as on the command line.
    pub flags: Vec<String>,
}

impl Candidate {
    pub fn uses_storage(&self) -> bool {
        self.storage.as_deref().is_some_and(|s| s != "none")
    }

    pub fn instance(&self, default: &Instance) -> Instance {
        let mut i = self.instance.clone().unwrap_or_else(|| default.clone());
        if self.pmem && i.pmem_gb == 0.0 {
            i.pmem_gb = 16.0;
        }
        if self.uses_storage() && i.flash_gb == 0.0 {
            i.flash_gb = 200.0;
        }
        i
    }

    /// The engine flags (PMem file and storage directories under `dir`).
    pub fn engine_flags(&self, dir: &Path, sample_bytes: f64) -> Vec<String> {
        let mut f: Vec<String> = vec!["--threads".into(), self.threads.clone().unwrap_or_else(|| "single".into())];
        let mut opt = |flag: &str, v: &Option<String>| {
            if let Some(v) = v {
                f.push(flag.into());
                f.push(v.clone());
            }
        };
        opt("--compression", &self.compression);
        opt("--compression-mode", &self.compression_mode);
        opt("--tier-policy", &self.tier_policy);
        opt("--storage", &self.storage);
        opt("--storage-mode", &self.storage_mode);
        opt("--wal", &self.wal);
        if self.pmem {
            let pmem_size = ((sample_bytes * 4.0) as u64).max(64 << 20);
            let dram = ((sample_bytes * self.dram_share.unwrap_or(0.2)) as u64).max(64 << 10);
            f.extend([
                "--pmem-path".into(),
                dir.join("pmem").display().to_string(),
                "--pmem-size".into(),
                pmem_size.to_string(),
                "--dram-max".into(),
                dram.to_string(),
            ]);
        }
        if self.uses_storage() {
            f.extend(["--maxmemory-policy".into(), "allkeys-lru".into()]);
        }
        f.extend(self.flags.iter().cloned());
        f
    }
}

pub fn read(path: &Path) -> anyhow::Result<Candidates> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let c: Candidates = toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    c.prices.validate().map_err(anyhow::Error::msg).with_context(|| path.display().to_string())?;
    c.instance.validate().map_err(anyhow::Error::msg).with_context(|| path.display().to_string())?;
    if c.candidates.is_empty() {
        bail!("{}: no [[candidate]]", path.display());
    }
    for (i, cand) in c.candidates.iter().enumerate() {
        if cand.name.is_empty() {
            bail!("{}: candidate {} has no name", path.display(), i + 1);
        }
        if let Some(r) = cand.cache_ratio {
            if !(r > 0.0 && r <= 1.0 && cand.uses_storage()) {
                bail!("{}: candidate {}: cache_ratio must be in (0, 1] and needs storage", path.display(), cand.name);
            }
        }
        if let Some(s) = cand.dram_share {
            if !(s > 0.0 && s <= 1.0 && cand.pmem) {
                bail!("{}: candidate {}: dram_share must be in (0, 1] and needs pmem = true", path.display(), cand.name);
            }
        }
        if let Some(t) = &cand.threads {
            if terrace_engine::config::Threads::parse(t).is_none() {
                bail!("{}: candidate {}: threads '{t}' is not single, a count from 1 to 256, elastic or elastic:N", path.display(), cand.name);
            }
        }
        if c.candidates.iter().filter(|o| o.name == cand.name).count() > 1 {
            bail!("{}: two candidates are named {}", path.display(), cand.name);
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_parses_and_bad_files_name_the_problem() {
        let text = include_str!("candidates.rs")
            .lines()
            .skip_while(|l| !l.contains("```toml"))
            .skip(1)
            .take_while(|l| !l.contains("```"))
            .map(|l| l.trim_start_matches("//! ").trim_start_matches("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let c: Candidates = toml::from_str(&text).unwrap();
        assert_eq!(c.candidates.len(), 4);
        assert_eq!(c.candidates[3].cache_ratio, Some(0.2));
        let pmem = c.candidates[2].instance(&c.instance);
        assert_eq!(pmem.pmem_gb, 16.0);
        let flags = c.candidates[2].engine_flags(Path::new("/tmp/x"), 100e6);
        assert!(flags.windows(2).any(|w| w[0] == "--dram-max" && w[1] == "20000000"), "{flags:?}");
        let dir = std::env::temp_dir().join(format!("terrace-cand-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "[[candidate]]\nname = \"a\"\ncache_ratio = 0.5\n").unwrap();
        let e = format!("{:#}", read(&bad).unwrap_err());
        assert!(e.contains("cache_ratio"), "{e}");
        std::fs::write(&bad, "[[candidate]]\nname = \"a\"\ncodec = \"zstd\"\n").unwrap();
        let e = format!("{:#}", read(&bad).unwrap_err());
        assert!(e.contains("codec"), "{e}");
        std::fs::write(&bad, "[[candidate]]\nname = \"a\"\nthreads = \"lots\"\n").unwrap();
        let e = format!("{:#}", read(&bad).unwrap_err());
        assert!(e.contains("threads 'lots'"), "{e}");
        std::fs::write(&bad, "[[candidate]]\nname = \"two\"\nthreads = \"elastic:2\"\n").unwrap();
        let two = read(&bad).unwrap();
        let flags = two.candidates[0].engine_flags(Path::new("/tmp/x"), 1e6);
        assert_eq!(flags[..2], ["--threads".to_string(), "elastic:2".to_string()]);
        assert_eq!(c.candidates[0].engine_flags(Path::new("/tmp/x"), 1e6)[..2], ["--threads".to_string(), "single".to_string()]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
