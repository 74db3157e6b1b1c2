//! The engine's Prometheus endpoint (`metrics_port`, GET /metrics): clients, commands, keys,
//! memory, and elastic threading (active reactors, each reactor's busy share, connections
//! and CPU, migrations, scale-ups and -downs).

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::state::Server;

/// The page, in Prometheus's text format.
pub fn render(srv: &Server) -> String {
    let mut s = String::new();
    let mut gauge = |name: &str, help: &str, kind: &str, samples: &[(String, f64)]| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(s, "{name}{labels} {v}");
        }
    };
    let one = |v: f64| vec![(String::new(), v)];
    let r = &srv.reactors;
    gauge("terrace_engine_connected_clients", "Clients connected.", "gauge", &one(srv.clients.lock().len() as f64));
    gauge("terrace_engine_commands_processed_total", "Commands run since start.", "counter", &one(srv.stats.commands_processed.load(Ordering::Relaxed) as f64));
    gauge("terrace_engine_used_memory_bytes", "Bytes allocated.", "gauge", &one(crate::alloc::used_memory() as f64));
    gauge("terrace_engine_reactors_max", "Reactor threads the engine may use.", "gauge", &one(r.count() as f64));
    gauge("terrace_engine_reactors_active", "Reactor threads serving connections.", "gauge", &one(r.active.load(Ordering::Relaxed) as f64));
    gauge("terrace_engine_connection_migrations_total", "Connections moved between reactors.", "counter", &one(r.migrations.load(Ordering::Relaxed) as f64));
    gauge("terrace_engine_scale_ups_total", "Reactors woken by the elastic controller.", "counter", &one(r.scale_ups.load(Ordering::Relaxed) as f64));
    gauge("terrace_engine_scale_downs_total", "Reactors folded back by the elastic controller.", "counter", &one(r.scale_downs.load(Ordering::Relaxed) as f64));
    let per = |f: &dyn Fn(&super::elastic::ReactorStats) -> f64| {
        r.stats.iter().enumerate().map(|(i, st)| (format!("{{reactor=\"{i}\"}}"), f(st))).collect::<Vec<_>>()
    };
    gauge(
        "terrace_engine_reactor_busy_ratio",
        "Share of the last sample a reactor spent on CPU.",
        "gauge",
        &per(&|st| st.busy_permille.load(Ordering::Relaxed) as f64 / 1000.0),
    );
    gauge(
        "terrace_engine_reactor_demand_ratio",
        "Share of the last sample a reactor ran or waited for a core.",
        "gauge",
        &per(&|st| st.demand_permille.load(Ordering::Relaxed) as f64 / 1000.0),
    );
    gauge("terrace_engine_reactor_connections", "Connections a reactor serves.", "gauge", &per(&|st| st.connections.load(Ordering::Relaxed) as f64));
    gauge("terrace_engine_reactor_cpu_seconds_total", "CPU time of a reactor thread.", "counter", &per(&|st| st.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9));
    gauge(
        "terrace_engine_reactor_spin_seconds_total",
        "Of a reactor's CPU time, the part spent polling with nothing to do (idle_spin_us).",
        "counter",
        &per(&|st| st.spin_ns.load(Ordering::Relaxed) as f64 / 1e9),
    );
    s
}

/// Serves /metrics on `listener` until the process ends.
pub async fn serve(srv: Arc<Server>, listener: tokio::net::TcpListener) {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let srv = srv.clone();
            async move { ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], render(&srv)) }
        }),
    );
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "metrics endpoint stopped");
    }
}
