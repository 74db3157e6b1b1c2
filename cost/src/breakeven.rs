//! The break-even interval between a fast, space-expensive configuration and a slow,
//! space-cheap one — Gray and Putzolu's Five-Minute Rule adapted to CPQPS and CPGB
//! (TierBase §2.4). A record accessed once every t seconds costs, per second,
//! `CPGB·size + CPQPS/t` where it lives; the two costs meet at
//!
//! `T = (CPQPS_slow − CPQPS_fast) / ((CPGB_fast − CPGB_slow) · size)`
//!
//! Records accessed more often than every T seconds are cheaper in the fast configuration.
//! When the fast side's access cost and the slow side's space cost are negligible this is
//! DESIGN §4's `CPQPS_slow / (CPGB_fast · AvgRecordSize)` (`five_minute_rule`).

use serde::Serialize;

use super::prices::GB;

/// Cost per operation per second and per GB of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UnitCosts {
    pub cpqps: f64,
    pub cpgb: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "seconds")]
pub enum BreakEven {
    /// Records accessed at least this often (seconds between accesses) belong in the fast one.
    Interval(f64),
    /// The "fast" configuration is no dearer per GB: every record belongs there.
    AlwaysFast,
    /// The "slow" configuration is no dearer per operation: every record belongs there.
    AlwaysSlow,
}

impl BreakEven {
    pub fn seconds(&self) -> Option<f64> {
        match self {
            BreakEven::Interval(s) => Some(*s),
            _ => None,
        }
    }
}

pub fn break_even(fast: UnitCosts, slow: UnitCosts, record_bytes: f64) -> BreakEven {
    let space = (fast.cpgb - slow.cpgb) * record_bytes / GB;
    let access = slow.cpqps - fast.cpqps;
    if space <= 0.0 {
        BreakEven::AlwaysFast
    } else if access <= 0.0 {
        BreakEven::AlwaysSlow
    } else {
        BreakEven::Interval(access / space)
    }
}

/// DESIGN §4's simplified form: `CPQPS_slow / (CPGB_fast · size)` (the tests check
/// `break_even` against it).
#[cfg(test)]
fn five_minute_rule(cpqps_slow: f64, cpgb_fast: f64, record_bytes: f64) -> f64 {
    cpqps_slow / (cpgb_fast * record_bytes / GB)
}

/// A record's cost per second in a configuration when accessed every `interval` seconds
/// (the tests check that the two costs meet at the break-even interval).
#[cfg(test)]
fn record_cost(c: UnitCosts, record_bytes: f64, interval: f64) -> f64 {
    c.cpgb * record_bytes / GB + c.cpqps / interval
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_simplified_rule_is_the_limit() {
        let fast = UnitCosts { cpqps: 1e-12, cpgb: 0.5 };
        let slow = UnitCosts { cpqps: 1e-3, cpgb: 1e-12 };
        let t = break_even(fast, slow, 1024.0).seconds().unwrap();
        let simple = five_minute_rule(slow.cpqps, fast.cpgb, 1024.0);
        assert!((t / simple - 1.0).abs() < 1e-6, "{t} vs {simple}");
    }

    #[test]
    fn dominated_pairs() {
        let a = UnitCosts { cpqps: 1e-5, cpgb: 0.2 };
        assert_eq!(break_even(a, UnitCosts { cpqps: 2e-5, cpgb: 0.3 }, 100.0), BreakEven::AlwaysFast);
        assert_eq!(break_even(a, UnitCosts { cpqps: 1e-6, cpgb: 0.1 }, 100.0), BreakEven::AlwaysSlow);
    }

    proptest! {
        /// Theorem (Five-Minute Rule): below the interval the fast configuration is cheaper for
        /// the record, above it the slow one.
        #[test]
        fn the_interval_splits_the_records(fq in 1e-7f64..1e-4, fg in 0.01f64..1.0, dq in 1e-7f64..1e-3, dg in 0.001f64..0.99, size in 16.0f64..1e5, k in 1.01f64..100.0) {
            let fast = UnitCosts { cpqps: fq, cpgb: fg };
            let slow = UnitCosts { cpqps: fq + dq, cpgb: fg * (1.0 - dg) };
            let t = break_even(fast, slow, size).seconds().unwrap();
            prop_assert!(record_cost(fast, size, t / k) < record_cost(slow, size, t / k));
            prop_assert!(record_cost(fast, size, t * k) > record_cost(slow, size, t * k));
            let at = (record_cost(fast, size, t) - record_cost(slow, size, t)).abs();
            prop_assert!(at <= 1e-9 * record_cost(fast, size, t));
        }
    }
}
