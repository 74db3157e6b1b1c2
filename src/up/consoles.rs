//! `terrace up --consoles N` (N above 1): N etcd members (the `etcd` binary of Debian's
//! etcd-server; member i on `--etcd-port` + 2i for clients, + 1 for its peers, its data in
//! `DATA_DIR/etcd-i`, its log in `DATA_DIR/etcd-i.log`) and N console processes (console i
//! on `--console-port` + i, its database `DATA_DIR/console-i.db`), every one supervised as
//! the engines are — restarted when it dies — so that one can be killed. The consoles elect
//! their coordinator on the etcd cluster and share their state there; the proxy takes its
//! topology from it.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;

use super::{supervised, wait_listening, Launch, Supervised};

/// What a console process needs that the appliance decided.
pub struct Plan<'a> {
    pub exe: &'a Path,
    pub data_dir: &'a Path,
    pub consoles: u16,
    pub console_port: u16,
    pub etcd_port: u16,
    pub engines: &'a [String],
    pub replicas: &'a [String],
    pub proxy: &'a str,
    pub proxy_admin_password: &'a str,
    pub engine_secret: &'a Path,
    /// Where the appliance starts the engines a console adds (`launch_socket`).
    pub launcher_socket: &'a Path,
}

/// The control plane running: etcd's client endpoints, the consoles' addresses, and the
/// supervised processes (stopped with the appliance).
pub struct Running {
    pub etcd: Vec<String>,
    pub consoles: Vec<String>,
    pub processes: Vec<Arc<Supervised>>,
}

/// Starts the etcd members, waits for them to listen, then starts the consoles.
pub fn start(plan: &Plan, stopping: &Arc<AtomicBool>) -> anyhow::Result<Running> {
    let n = plan.consoles;
    anyhow::ensure!(n % 2 == 1 && n <= 7, "--consoles must be 1, 3, 5 or 7 (an etcd member beside each console: an odd number keeps a majority)");
    let port = |base: u16, offset: u16| base.checked_add(offset).context("the ports after --etcd-port or --console-port run out");
    let (mut clients, mut peers) = (Vec::new(), Vec::new());
    for i in 0..n {
        clients.push(format!("127.0.0.1:{}", port(plan.etcd_port, 2 * i)?));
        peers.push(format!("127.0.0.1:{}", port(plan.etcd_port, 2 * i + 1)?));
    }
    let cluster: Vec<String> = peers.iter().enumerate().map(|(i, p)| format!("etcd-{i}=http://{p}")).collect();
    let mut processes = Vec::new();
    for i in 0..n as usize {
        let dir = plan.data_dir.join(format!("etcd-{i}"));
        #[rustfmt::skip]
        let args = vec![
            "etcd".to_string(), "--name".into(), format!("etcd-{i}"), "--data-dir".into(), dir.display().to_string(),
            "--listen-client-urls".into(), format!("http://{}", clients[i]), "--advertise-client-urls".into(), format!("http://{}", clients[i]),
            "--listen-peer-urls".into(), format!("http://{}", peers[i]), "--initial-advertise-peer-urls".into(), format!("http://{}", peers[i]),
            "--initial-cluster".into(), cluster.join(","), "--initial-cluster-token".into(), "terrace".into(),
            // A member cut off and back must not depose the leader the others elected
            // meanwhile (without pre-vote its higher term did, stalling etcd for seconds).
            "--pre-vote".into(),
        ];
        let launch = Launch { args, env: Vec::new(), log: Some(plan.data_dir.join(format!("etcd-{i}.log"))) };
        processes.push(supervised(format!("etcd member {i} ({})", clients[i]), launch, stopping).context("cannot start etcd (Debian's etcd-server package)")?);
    }
    for addr in &clients {
        wait_listening(addr, "etcd member")?;
    }
    let admin_password = first_start_password(plan.data_dir);
    let mut consoles = Vec::new();
    for i in 0..n {
        let console_port = port(plan.console_port, i)?;
        let db: PathBuf = plan.data_dir.join(format!("console-{i}.db"));
        #[rustfmt::skip]
        let mut args = vec![
            plan.exe.display().to_string(), "console".into(), "--bind".into(), "127.0.0.1".into(), "--port".into(), console_port.to_string(),
            "--db".into(), db.display().to_string(), "--engines".into(), plan.engines.join(","), "--proxies".into(), plan.proxy.to_string(),
            "--etcd".into(), clients.join(","), "--launcher-socket".into(), plan.launcher_socket.display().to_string(),
        ];
        if !plan.replicas.is_empty() {
            args.extend(["--replicas".into(), plan.replicas.join(",")]);
        }
        let mut env = vec![
            ("TERRACE_PROXY_ADMIN_PASSWORD".to_string(), plan.proxy_admin_password.to_string()),
            ("TERRACE_CONSOLE_ENGINE_KEY_FILE".to_string(), plan.engine_secret.display().to_string()),
        ];
        if let Some(p) = &admin_password {
            env.push(("TERRACE_ADMIN_PASSWORD".into(), p.clone()));
        }
        let addr = format!("127.0.0.1:{console_port}");
        processes.push(supervised(format!("console {i} ({addr})"), Launch { args, env, log: None }, stopping)?);
        consoles.push(addr);
    }
    for addr in &consoles {
        wait_listening(addr, "console")?;
    }
    if let Some(p) = admin_password.filter(|_| std::env::var_os("TERRACE_ADMIN_PASSWORD").is_none()) {
        eprintln!("terrace up: console admin password (first start; shown once, change it on the Account page): {p}");
    }
    Ok(Running { etcd: clients, consoles, processes })
}

/// The consoles' first admin password: TERRACE_ADMIN_PASSWORD, or one made here on the
/// first start (no console database yet), the same for every console. None later: each
/// database has its users, and the coordinator's are every console's.
fn first_start_password(data_dir: &Path) -> Option<String> {
    if let Ok(p) = std::env::var("TERRACE_ADMIN_PASSWORD") {
        return Some(p);
    }
    (!data_dir.join("console-0.db").exists()).then(|| terrace_console::auth::random_hex(12))
}
