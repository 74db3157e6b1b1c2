//! The Terrace cluster a fault scenario runs on: four hosts — `console`, `proxy`, `e0` (the
//! primary of all slots) and `r0` (its replica) — each running this binary's subcommand as
//! an operator would: engines restarted after a crash with `--wait-for-role` (the fence
//! `terrace up` uses), the console checking every 200 ms and failing over after 1 s.

use std::path::{Path, PathBuf};

use super::procs::{self, Procs};
use super::workload::Target;
use super::System;

const ENGINE_PORT: u16 = 7001;
const PROXY_PORT: u16 = 6379;
const CONSOLE_PORT: u16 = 8080;
const PROXY_ADMIN_PASSWORD: &str = "faults-proxy-admin";

pub struct Cluster {
    procs: Procs,
    exe: PathBuf,
    wal: bool,
}

impl Cluster {
    /// Starts the four hosts' processes (not yet settled: see `settled`).
    pub fn start(dir: &Path, wal: bool, pin: Option<String>) -> anyhow::Result<Cluster> {
        let procs = Procs::new(dir, &["console", "proxy", "e0", "r0"], pin)?;
        let mut cluster = Cluster { procs, exe: std::env::current_exe()?, wal };
        cluster.start_engine("e0", false)?;
        cluster.start_engine("r0", false)?;
        cluster.start_proxy()?;
        cluster.start_console()?;
        Ok(cluster)
    }

    /// Starts engine `host` (`e0` or `r0`) on its data directory; `fenced` as a supervisor
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
        let (ip, engines) = (self.procs.ip("proxy"), self.procs.addr("e0", ENGINE_PORT));
        let port = PROXY_PORT.to_string();
        let args = ["proxy", "--bind", &ip, "--port", &port, "--memcache-port", "11211", "--engines", &engines, "--await-console"];
        self.procs.spawn("proxy", &self.exe, &args, &[("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)])?;
        procs::wait_port(&self.procs.addr("proxy", PROXY_PORT))
    }

    /// Starts (or restarts, on its database) the console.
    fn start_console(&mut self) -> anyhow::Result<()> {
        let ip = self.procs.ip("console");
        let (engines, replicas, proxies) = (self.procs.addr("e0", ENGINE_PORT), self.procs.addr("r0", ENGINE_PORT), self.procs.addr("proxy", PROXY_PORT));
        let db = self.procs.dir.join("console.db").to_string_lossy().into_owned();
        let port = CONSOLE_PORT.to_string();
        #[rustfmt::skip]
        let args = [
            "console", "--bind", &ip, "--port", &port, "--db", &db, "--engines", &engines, "--replicas", &replicas,
            "--proxies", &proxies, "--health-ms", "200", "--failover-after-ms", "1000", "--reconcile-ms", "300",
        ];
        let env = [("TERRACE_ADMIN_PASSWORD", "faults-console-admin"), ("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)];
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

    fn data_nodes(&self) -> [String; 2] {
        [self.procs.addr("e0", ENGINE_PORT), self.procs.addr("r0", ENGINE_PORT)]
    }
}
