//! The cost model (TierBase §2 and §5, DESIGN §4): pure functions over prices, workloads and
//! measured capacities — no I/O, so the advisor, `terrace cost-eval` and the console compute
//! the same numbers. `prices`: what cores and memory cost; `model`: PC, SC, C, CPQPS, CPGB,
//! the optimum and the category; `tiered`: cache + storage with MR = f(CR) and the optimal
//! cache ratio; `breakeven`: the adapted Five-Minute Rule; `features`: workload features →
//! optimizations (Table 1); `advisor`: the advisor's choice among measured or estimated
//! configurations under the live workload.

pub mod advisor;
pub mod breakeven;
pub mod features;
pub mod model;
pub mod prices;
pub mod tiered;

pub use breakeven::{break_even, BreakEven, UnitCosts};
pub use model::{evaluate, optimal, Capacity, Category, Evaluation, Workload};
pub use prices::{Instance, Prices, GB};
pub use tiered::{Curve, Tiered, TieredCost};
