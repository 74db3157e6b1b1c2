//! Terrace console: the control plane (tenants, slot map, dictionaries, cost advisor, REST API).
//!
//! Not built yet; see the "Console" issue.
