//! The command table, from the crate shared with the proxy (`terrace_commands::table`); each
//! command's handler is bound to it in `handlers`.

pub use terrace_commands::table::*;
