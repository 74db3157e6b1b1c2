//! The Terrace cluster a fault scenario runs on: the hosts `console`, `proxy`, `e0` (the
//! primary of all slots) and `r0` (its replica) — with two groups, `e1` and `r1` too, each
//! primary owning half the slots and the console moving slots slowly (`--move-rate`), so a
//! fault lands in the middle of a move — each running this binary's subcommand as an
//! operator would: engines restarted after a crash with `--wait-for-role` (the fence
//! `terrace up` uses), the console checking every 200 ms and failing over after 1 s. With
//! three consoles, hosts `console`, `console1` and `console2` each run a console and an
//! etcd member (processes `etcd`, `etcd1`, `etcd2`): the consoles elect their coordinator
//! there, and the proxy takes its topology from there.

use std::path::{Path, PathBuf};

use super::procs::{self, Procs};
use super::workload::Target;
use super::System;

const ENGINE_PORT: u16 = 7001;
const PROXY_PORT: u16 = 6379;
const CONSOLE_PORT: u16 = 8080;
const PROXY_ADMIN_PASSWORD: &str = "faults-proxy-admin";
pub const CONSOLE_ADMIN_PASSWORD: &str = "faults-console-admin";
/// The primaries and their replicas, group by group.
const GROUPS: [[&str; 2]; 2] = [["e0", "r0"], ["e1", "r1"]];
/// The consoles' hosts, and the etcd member each runs (with three consoles).
const CONSOLES: [(&str, &str); 3] = [("console", "etcd"), ("console1", "etcd1"), ("console2", "etcd2")];
const ETCD_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;

pub struct Cluster {
    procs: Procs,
    exe: PathBuf,
    wal: bool,
    groups: usize,
    /// 1, or 3 on etcd.
    consoles: usize,
}

impl Cluster {
    /// Starts the hosts' processes for `groups` (1 or 2) groups of a primary and a replica
    /// (not yet settled: see `settled`).
    /// and `consoles` (1, or 3 on etcd) consoles.
    pub fn start(dir: &Path, wal: bool, pin: Option<String>, groups: usize, consoles: usize) -> anyhow::Result<Cluster> {
        let groups = groups.clamp(1, GROUPS.len());
        let consoles = if consoles > 1 { CONSOLES.len() } else { 1 };
        let mut hosts = vec!["proxy"];
        hosts.extend(CONSOLES[..consoles].iter().map(|c| c.0));
        hosts.extend(GROUPS[..groups].iter().flatten());
        let procs = Procs::new(dir, &hosts, pin)?;
        let mut cluster = Cluster { procs, exe: std::env::current_exe()?, wal, groups, consoles };
        for host in GROUPS[..groups].iter().flatten() {
            cluster.start_engine(host, false)?;
        }
        if consoles > 1 {
            for (host, etcd) in CONSOLES {
                cluster.start_etcd(host, etcd)?;
            }
        }
        cluster.start_proxy()?;
        for (host, _) in &CONSOLES[..consoles] {
            cluster.start_console(host)?;
        }
        Ok(cluster)
    }

    /// The etcd members' client endpoints (none with one console).
    fn etcd_endpoints(&self) -> Option<String> {
        (self.consoles > 1).then(|| CONSOLES.iter().map(|(h, _)| self.procs.addr(h, ETCD_PORT)).collect::<Vec<_>>().join(","))
    }

    /// Starts the etcd member `name` on `host` (its data kept across restarts).
    fn start_etcd(&mut self, host: &'static str, name: &'static str) -> anyhow::Result<()> {
        let (client, peer) = (format!("http://{}", self.procs.addr(host, ETCD_PORT)), format!("http://{}", self.procs.addr(host, ETCD_PEER_PORT)));
        let cluster: Vec<String> = CONSOLES.iter().map(|(h, n)| format!("{n}=http://{}", self.procs.addr(h, ETCD_PEER_PORT))).collect();
        let data = self.procs.dir.join(name).to_string_lossy().into_owned();
        #[rustfmt::skip]
        let args = [
            "--name", name, "--data-dir", &data, "--listen-client-urls", &client, "--advertise-client-urls", &client,
            "--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer, "--initial-cluster", &cluster.join(","),
            "--pre-vote", // as `terrace up --consoles` runs them
        ];
        self.procs.spawn_as(name, host, Path::new("etcd"), &args, &[])
    }

    /// The addresses of `hosts` on the engines' port, comma-separated.
    fn engine_addrs(&self, hosts: impl Iterator<Item = &'static str>) -> String {
        hosts.map(|h| self.procs.addr(h, ENGINE_PORT)).collect::<Vec<_>>().join(",")
    }

    fn primaries(&self) -> String {
        self.engine_addrs(GROUPS[..self.groups].iter().map(|g| g[0]))
    }

    /// Starts engine `host` (`e0`, `r0`, …) on its data directory; `fenced` as a supervisor
    /// restarts a replicated engine: serving nothing until the console gives it its role.
    fn start_engine(&mut self, host: &'static str, fenced: bool) -> anyhow::Result<()> {
        let ip = self.procs.ip(host);
        let data = self.procs.dir.join(host);
        std::fs::create_dir_all(&data)?;
        let port = ENGINE_PORT.to_string();
        let data = data.to_string_lossy().into_owned();
        let mut args = vec!["engine", "--bind", &ip, "--port", &port, "--data-dir", &data, "--threads", "1"];
        if self.wal {
            args.extend(["--wal", "always"]);
        }
        if fenced {
            args.push("--wait-for-role");
        }
        self.procs.spawn(host, &self.exe, &args, &[])?;
        procs::wait_port(&self.procs.addr(host, ENGINE_PORT))
    }

    fn start_proxy(&mut self) -> anyhow::Result<()> {
        let (ip, engines) = (self.procs.ip("proxy"), self.primaries());
        let port = PROXY_PORT.to_string();
        let mut args = vec!["proxy", "--bind", &ip, "--port", &port, "--memcache-port", "11211", "--engines", &engines, "--await-console"];
        let etcd = self.etcd_endpoints();
        if let Some(endpoints) = &etcd {
            args.extend(["--etcd", endpoints]);
        }
        self.procs.spawn("proxy", &self.exe, &args, &[("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)])?;
        procs::wait_port(&self.procs.addr("proxy", PROXY_PORT))
    }

    /// Starts (or restarts, on its database) the console on `host`.
    fn start_console(&mut self, host: &'static str) -> anyhow::Result<()> {
        let ip = self.procs.ip(host);
        let (engines, proxies) = (self.primaries(), self.procs.addr("proxy", PROXY_PORT));
        let replicas = self.engine_addrs(GROUPS[..self.groups].iter().map(|g| g[1]));
        let db = self.procs.dir.join(format!("{host}.db")).to_string_lossy().into_owned();
        let advertise = self.procs.addr(host, CONSOLE_PORT);
        let port = CONSOLE_PORT.to_string();
        #[rustfmt::skip]
        let mut args = vec![
            "console", "--bind", &ip, "--port", &port, "--db", &db, "--engines", &engines, "--replicas", &replicas,
            "--proxies", &proxies, "--health-ms", "200", "--failover-after-ms", "1000", "--reconcile-ms", "300",
        ];
        if self.groups > 1 {
            // (Slow: a move of 2 MB takes about 5 s, so a fault lands in its copy.)
            args.extend(["--move-rate", "400kb"]);
        }
        let etcd = self.etcd_endpoints();
        if let Some(endpoints) = &etcd {
            args.extend(["--etcd", endpoints, "--advertise", &advertise]);
        }
        let env = [("TERRACE_ADMIN_PASSWORD", CONSOLE_ADMIN_PASSWORD), ("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)];
        self.procs.spawn(host, &self.exe, &args, &env)?;
        procs::wait_port(&self.procs.addr(host, CONSOLE_PORT))
    }
}

impl System for Cluster {
    fn target(&self) -> Target {
        Target::Fixed(self.procs.addr("proxy", PROXY_PORT))
    }

    fn procs(&mut self) -> &mut Procs {
        &mut self.procs
    }

    fn restart(&mut self, host: &'static str) -> anyhow::Result<()> {
        match CONSOLES.iter().find(|(h, _)| *h == host) {
            Some((h, _)) => self.start_console(h),
            None => self.start_engine(host, true),
        }
    }

    fn groups(&self) -> Vec<[String; 2]> {
        GROUPS[..self.groups].iter().map(|g| g.map(|h| self.procs.addr(h, ENGINE_PORT))).collect()
    }

    fn console(&self) -> Option<String> {
        Some(self.procs.addr("console", CONSOLE_PORT))
    }

    /// The console that coordinates now (its host), as etcd names it.
    fn coordinator(&self) -> anyhow::Result<&'static str> {
        let endpoints = self.etcd_endpoints().ok_or_else(|| anyhow::anyhow!("one console: it always coordinates"))?;
        let client = terrace_etcd::Client::new(&endpoints.split(',').map(String::from).collect::<Vec<_>>(), std::time::Duration::from_secs(2))?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (kv, _) = runtime.block_on(client.get(terrace_console::coordination::COORDINATOR_KEY.as_bytes()))?;
        let named = kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()).unwrap_or_default();
        CONSOLES
            .iter()
            .map(|(h, _)| *h)
            .find(|h| self.procs.addr(h, CONSOLE_PORT) == named)
            .ok_or_else(|| anyhow::anyhow!("no console coordinates now ({named:?})"))
    }
}
