//! What things cost: the price of cores and of each kind of memory, the instance shape a
//! tenant is provisioned on, and the replication factor. Configuration, not code — the
//! defaults follow DESIGN §4: one unit is 1 core + 4 GB DRAM; PMem costs 0.38× DRAM per GB
//! and flash 0.017× (Kassa et al., ACM TOS 2022, table 1).

use serde::{Deserialize, Serialize};

/// Bytes in a GB, as prices are quoted (GiB: memory is sold in powers of two).
pub const GB: f64 = 1024.0 * 1024.0 * 1024.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prices {
    /// Price of one core (per unit of time; only ratios matter).
    pub core: f64,
    /// Price of one GB of DRAM.
    pub dram_gb: f64,
    /// PMem per GB as a share of DRAM's price.
    pub pmem_ratio: f64,
    /// Flash (the storage tier) per GB as a share of DRAM's price.
    pub flash_ratio: f64,
    /// Copies of each record kept (1: none besides the primary).
    pub replication: f64,
}

impl Default for Prices {
    fn default() -> Prices {
        // 1 core + 4 GB = 1 unit, split so a core costs as much as its 4 GB of DRAM.
        Prices { core: 0.5, dram_gb: 0.125, pmem_ratio: 0.38, flash_ratio: 0.017, replication: 1.0 }
    }
}

impl Prices {
    pub fn pmem_gb(&self) -> f64 {
        self.dram_gb * self.pmem_ratio
    }

    pub fn flash_gb(&self) -> f64 {
        self.dram_gb * self.flash_ratio
    }

    /// Every price finite and non-negative, replication at least 1; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [("core", self.core), ("dram_gb", self.dram_gb), ("pmem_ratio", self.pmem_ratio), ("flash_ratio", self.flash_ratio)] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("prices.{key} must be a non-negative number, got {v}"));
            }
        }
        if !self.replication.is_finite() || self.replication < 1.0 {
            return Err(format!("prices.replication must be at least 1, got {}", self.replication));
        }
        if self.core + self.dram_gb <= 0.0 {
            return Err("prices.core and prices.dram_gb cannot both be 0".into());
        }
        Ok(())
    }
}

/// The resources of one instance (the unit tenants are provisioned in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Instance {
    pub cores: f64,
    pub dram_gb: f64,
    pub pmem_gb: f64,
    pub flash_gb: f64,
}

impl Default for Instance {
    fn default() -> Instance {
        Instance { cores: 1.0, dram_gb: 4.0, pmem_gb: 0.0, flash_gb: 0.0 }
    }
}

impl Instance {
    /// Cost(i): what one such instance costs at `prices`.
    pub fn cost(&self, prices: &Prices) -> f64 {
        self.cores * prices.core + self.dram_gb * prices.dram_gb + self.pmem_gb * prices.pmem_gb() + self.flash_gb * prices.flash_gb()
    }

    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [("cores", self.cores), ("dram_gb", self.dram_gb), ("pmem_gb", self.pmem_gb), ("flash_gb", self.flash_gb)] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("instance.{key} must be a non-negative number, got {v}"));
            }
        }
        if self.cores <= 0.0 {
            return Err("instance.cores must be more than 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_unit_costs_one() {
        let p = Prices::default();
        assert!((Instance::default().cost(&p) - 1.0).abs() < 1e-12);
        assert!((p.pmem_gb() / p.dram_gb - 0.38).abs() < 1e-12);
        assert!((p.flash_gb() / p.dram_gb - 0.017).abs() < 1e-12);
        let with_pmem = Instance { pmem_gb: 16.0, ..Instance::default() };
        assert!((with_pmem.cost(&p) - (1.0 + 16.0 * 0.125 * 0.38)).abs() < 1e-12);
    }

    #[test]
    fn bad_prices_name_their_key() {
        let e = Prices { replication: 0.5, ..Prices::default() }.validate().unwrap_err();
        assert!(e.contains("prices.replication"), "{e}");
        let e = Prices { pmem_ratio: -1.0, ..Prices::default() }.validate().unwrap_err();
        assert!(e.contains("prices.pmem_ratio"), "{e}");
        let e = Instance { cores: 0.0, ..Instance::default() }.validate().unwrap_err();
        assert!(e.contains("instance.cores"), "{e}");
        let e = toml::from_str::<Prices>("cores = 1").unwrap_err().to_string();
        assert!(e.contains("cores"), "{e}");
    }
}
