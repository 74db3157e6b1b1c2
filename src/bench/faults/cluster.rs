//! The Terrace cluster a fault scenario runs on: the hosts `console`, `proxy`, `e0` (the
//! primary of all slots) and `r0` (its replica) — with two groups, `e1` and `r1` too, each
//! primary owning half the slots and the console moving slots slowly (`--move-rate`), so a
//! fault lands in the middle of a move — each running this binary's subcommand as an
//! operator would: engines restarted after a crash with `--wait-for-role` (the fence
//! `terrace up` uses), the console checking every 200 ms and failing over after 1 s.

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

pub struct Cluster {
    procs: Procs,
    exe: PathBuf,
    wal: bool,
    groups: usize,
}

impl Cluster {
    /// Starts the hosts' processes for `groups` (1 or 2) groups of a primary and a replica
    /// (not yet settled: see `settled`).
    pub fn start(dir: &Path, wal: bool, pin: Option<String>, groups: usize) -> anyhow::Result<Cluster> {
        let groups = groups.clamp(1, GROUPS.len());
        let mut hosts = vec!["console", "proxy"];
        hosts.extend(GROUPS[..groups].iter().flatten());
        let procs = Procs::new(dir, &hosts, pin)?;
        let mut cluster = Cluster { procs, exe: std::env::current_exe()?, wal, groups };
        for host in GROUPS[..groups].iter().flatten() {
            cluster.start_engine(host, false)?;
        }
        cluster.start_proxy()?;
        cluster.start_console()?;
        Ok(cluster)
    }

    /// The addresses of `hosts` on the engines' port, comma-separated.
    fn engine_addrs(&self, hosts: impl Iterator<Item = &'static str>) -> String {
        hosts.map(|h| self.procs.addr(h, ENGINE_PORT)).collect::<Vec<_>>().join(",")
    }

    fn primaries(&self) -> String {
        self.engine_addrs(GROUPS[..self.groups].iter().map(|g| g[0]))
    }

    /// The console's address (host:port).
    pub fn console_addr(&self) -> String {
        self.procs.addr("console", CONSOLE_PORT)
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
        let args = ["proxy", "--bind", &ip, "--port", &port, "--memcache-port", "11211", "--engines", &engines, "--await-console"];
        self.procs.spawn("proxy", &self.exe, &args, &[("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)])?;
        procs::wait_port(&self.procs.addr("proxy", PROXY_PORT))
    }

    /// Starts (or restarts, on its database) the console.
    fn start_console(&mut self) -> anyhow::Result<()> {
        let ip = self.procs.ip("console");
        let (engines, proxies) = (self.primaries(), self.procs.addr("proxy", PROXY_PORT));
        let replicas = self.engine_addrs(GROUPS[..self.groups].iter().map(|g| g[1]));
        let db = self.procs.dir.join("console.db").to_string_lossy().into_owned();
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
        let env = [("TERRACE_ADMIN_PASSWORD", CONSOLE_ADMIN_PASSWORD), ("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)];
        self.procs.spawn("console", &self.exe, &args, &env)?;
        procs::wait_port(&self.procs.addr("console", CONSOLE_PORT))
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
        match host {
            "console" => self.start_console(),
            _ => self.start_engine(host, true),
        }
    }

    fn groups(&self) -> Vec<[String; 2]> {
        GROUPS[..self.groups].iter().map(|g| g.map(|h| self.procs.addr(h, ENGINE_PORT))).collect()
    }

    fn console(&self) -> Option<String> {
        Some(self.console_addr())
    }
}
