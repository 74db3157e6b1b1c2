//! The cost framework's commands (sample → load → replay → calculate → iterate): `record`
//! takes a trace and a data sample from a live engine, `replay` plays one back, `eval` runs
//! `terrace cost-eval` over candidate configurations. The model itself is
//! `terrace_engine::cost` (pure), shared with the engine's advisor.

pub mod candidates;
pub mod eval;
pub mod footprint;
pub mod record;
pub mod replay;
pub mod trace;
