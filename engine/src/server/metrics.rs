//! The engine's Prometheus endpoint (`metrics_port`, GET /metrics): clients, commands, keys,
//! memory, hits and misses, error replies, replication, per tenant (commands by class, hits,
//! misses, OOM refusals, bytes against its limit), and elastic threading (active reactors, each reactor's busy share, connections
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
    gauge("terrace_engine_maxmemory_bytes", "The data limit (0: none).", "gauge", &one(srv.runtime.maxmemory.load(Ordering::Relaxed) as f64));
    let st = &srv.stats;
    gauge("terrace_engine_keyspace_hits_total", "Key lookups that found their key.", "counter", &one(st.keyspace_hits.load(Ordering::Relaxed) as f64));
    gauge("terrace_engine_keyspace_misses_total", "Key lookups that did not.", "counter", &one(st.keyspace_misses.load(Ordering::Relaxed) as f64));
    let errors: Vec<(String, f64)> = st.errors.lock().iter().map(|(code, n)| (format!("{{code=\"{}\"}}", escape(code)), *n as f64)).collect();
    gauge("terrace_engine_error_replies_total", "Error replies by their code (OOM: writes refused for memory).", "counter", &errors);
    gauge(
        "terrace_engine_replication_offset_bytes",
        "The replication stream's offset (a replica: how far it got).",
        "gauge",
        &one(srv.replication.offset() as f64),
    );
    gauge("terrace_engine_is_replica", "1 for a replica, 0 for a primary.", "gauge", &one(srv.replication.is_replica() as u8 as f64));
    // Per tenant (namespace): what the console's history charts, for Grafana.
    let names: Vec<(usize, String)> = srv
        .namespaces
        .lock()
        .iter()
        .enumerate()
        .filter(|(_, n)| super::namespaces::is_live(n))
        .map(|(i, n)| (i, if n.is_empty() { "default".to_string() } else { n.clone() }))
        .collect();
    let tenant = |name: &str| format!("tenant=\"{}\"", escape(name));
    let mut commands = Vec::new();
    let (mut hits, mut misses, mut oom, mut used, mut limit) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (ns, name) in &names {
        let Some(t) = srv.tenant_stats.get(*ns) else { continue };
        let (h, m, o, by_class) = t.lifetime_totals();
        let label = tenant(name);
        hits.push((format!("{{{label}}}"), h as f64));
        misses.push((format!("{{{label}}}"), m as f64));
        oom.push((format!("{{{label}}}"), o as f64));
        used.push((format!("{{{label}}}"), srv.keyspace.namespace_used(*ns) as f64));
        limit.push((format!("{{{label}}}"), srv.keyspace.namespace_limit(*ns) as f64));
        commands.extend(by_class.into_iter().filter(|(_, n)| *n > 0).map(|(class, n)| (format!("{{{label},class=\"{class}\"}}"), n as f64)));
    }
    gauge("terrace_engine_tenant_commands_total", "A tenant's commands by class (string, hash, list…).", "counter", &commands);
    gauge("terrace_engine_tenant_keyspace_hits_total", "A tenant's key lookups that found their key.", "counter", &hits);
    gauge("terrace_engine_tenant_keyspace_misses_total", "A tenant's key lookups that did not.", "counter", &misses);
    gauge("terrace_engine_tenant_oom_refused_total", "A tenant's writes refused for memory.", "counter", &oom);
    gauge("terrace_engine_tenant_used_bytes", "A tenant's data bytes on this engine.", "gauge", &used);
    gauge("terrace_engine_tenant_limit_bytes", "A tenant's data limit on this engine (0: none).", "gauge", &limit);
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

/// Prometheus label values escape backslash, quote and newline.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Serves /metrics on `listener` until the process ends (with `metrics_token_file`, only to
/// requests carrying its bearer token: the text names tenants and their traffic).
pub async fn serve(srv: Arc<Server>, listener: tokio::net::TcpListener) {
    use axum::http::{header, HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: HeaderMap| {
            let srv = srv.clone();
            async move {
                let sent = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
                if !terrace_commands::settings::bearer_allows(sent, srv.config.metrics_token.as_deref()) {
                    return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a bearer token is needed (metrics_token_file)\n")
                        .into_response();
                }
                ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], render(&srv)).into_response()
            }
        }),
    );
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "metrics endpoint stopped");
    }
}
