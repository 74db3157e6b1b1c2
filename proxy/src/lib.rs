//! Terrace protocol proxy: Redis (RESP2/3) and Memcached front ends that route to engines.
//!
//! Not built yet; see the "Proxy" issue. Until it lands, `terrace up` runs a single engine.
