//! The comparison point: redis-server as primary (`e0`) and replica (`r0`), watched by three
//! redis-sentinel (`s1`..`s3`, quorum 2, `down-after-milliseconds` 2000), each a host of its
//! own. Clients find the master by asking a Sentinel on every new connection, as Sentinel
//! clients do. Each server runs on a config file of its own (Sentinel rewrites it when it
//! re-points a server), with Redis's defaults otherwise; a killed server is restarted on it.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::procs::{self, Procs};
use super::workload::Target;
use super::System;

const PORT: u16 = 6379;
const SENTINEL_PORT: u16 = 26379;
const MASTER: &str = "faults";

pub struct Sentinels {
    procs: Procs,
    redis_server: PathBuf,
}

impl Sentinels {
    pub fn start(dir: &Path, pin: Option<String>, redis_server: &str, redis_sentinel: &str) -> anyhow::Result<Sentinels> {
        let which = |p: &str| -> anyhow::Result<PathBuf> {
            let out = std::process::Command::new("sh").args(["-c", &format!("command -v {p}")]).output()?;
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            anyhow::ensure!(!path.is_empty(), "{p} not found (apt-get install redis-server redis-sentinel)");
            Ok(PathBuf::from(path))
        };
        let procs = Procs::new(dir, &["e0", "r0", "s1", "s2", "s3"], pin)?;
        let mut me = Sentinels { procs, redis_server: which(redis_server)? };
        let e0 = me.procs.ip("e0");
        std::fs::write(dir.join("e0.conf"), server_conf(&e0, dir, "e0", None))?;
        std::fs::write(dir.join("r0.conf"), server_conf(&me.procs.ip("r0"), dir, "r0", Some(&e0)))?;
        me.start_server("e0")?;
        me.start_server("r0")?;
        let sentinel = which(redis_sentinel)?;
        for s in ["s1", "s2", "s3"] {
            let ip = me.procs.ip(s);
            let conf = dir.join(format!("{s}.conf"));
            #[rustfmt::skip]
            std::fs::write(&conf, format!(
                "bind {ip}\nport {SENTINEL_PORT}\nprotected-mode no\ndir {}\n\
                 sentinel monitor {MASTER} {e0} {PORT} 2\n\
                 sentinel down-after-milliseconds {MASTER} 2000\n\
                 sentinel failover-timeout {MASTER} 10000\n\
                 sentinel parallel-syncs {MASTER} 1\n",
                dir.display()
            ))?;
            let conf = conf.to_string_lossy().into_owned();
            me.procs.spawn(s, &sentinel, &[&conf], &[])?;
            procs::wait_port(&me.procs.addr(s, SENTINEL_PORT))?;
        }
        Ok(me)
    }

    fn start_server(&mut self, host: &'static str) -> anyhow::Result<()> {
        let conf = self.procs.dir.join(format!("{host}.conf")).to_string_lossy().into_owned();
        let server = self.redis_server.clone();
        self.procs.spawn(host, &server, &[&conf], &[]).context("redis-server")?;
        procs::wait_port(&self.procs.addr(host, PORT))
    }
}

fn server_conf(ip: &str, dir: &Path, host: &str, master: Option<&str>) -> String {
    let data = dir.join(host);
    let _ = std::fs::create_dir_all(&data);
    let mut conf = format!("bind {ip}\nport {PORT}\nprotected-mode no\ndir {}\n", data.display());
    if let Some(m) = master {
        conf.push_str(&format!("replicaof {m} {PORT}\n"));
    }
    conf
}

impl System for Sentinels {
    fn target(&self) -> Target {
        Target::Sentinels { sentinels: ["s1", "s2", "s3"].iter().map(|s| self.procs.addr(s, SENTINEL_PORT)).collect(), master: MASTER.into() }
    }

    fn procs(&mut self) -> &mut Procs {
        &mut self.procs
    }

    fn restart(&mut self, host: &'static str) -> anyhow::Result<()> {
        self.start_server(host)
    }

    fn groups(&self) -> Vec<[String; 2]> {
        vec![[self.procs.addr("e0", PORT), self.procs.addr("r0", PORT)]]
    }
}
