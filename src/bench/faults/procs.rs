//! The processes a fault scenario runs on its hosts (`netns`), by host name: started with
//! their output in `DIR/HOST.log`, killed, paused, cut off and read as the scenario says, and
//! what both systems under test share (a settled check of roles, reading keys back).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::super::resp_client::{Client, Reply};
use super::netns::Net;
use super::workload::Target;

pub struct Procs {
    procs: HashMap<&'static str, Child>,
    pub dir: PathBuf,
    /// Every process pinned to this core (`taskset -c`), when set.
    pin: Option<String>,
    // Last: the processes go before their namespaces.
    net: Net,
}

impl Procs {
    pub fn new(dir: &Path, hosts: &[&str], pin: Option<String>) -> anyhow::Result<Procs> {
        Ok(Procs { procs: HashMap::new(), dir: dir.to_path_buf(), pin, net: Net::new(hosts)? })
    }

    pub fn ip(&self, host: &str) -> String {
        self.net.host(host).ip.clone()
    }

    pub fn addr(&self, host: &str, port: u16) -> String {
        format!("{}:{port}", self.net.host(host).ip)
    }

    /// Runs `program args` on `host` as the process named like the host (replacing a
    /// process it ran before).
    pub fn spawn(&mut self, host: &'static str, program: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
        self.spawn_as(host, host, program, args, env)
    }

    /// Runs `program args` on `host` as the process `name` (a host may run several: a
    /// console and an etcd member), logging to `DIR/NAME.log`.
    pub fn spawn_as(&mut self, name: &'static str, host: &str, program: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("{name}.log")))?;
        // (taskset sets the affinity and execs the program: the pid is the program's.)
        let mut cmd = match &self.pin {
            Some(core) => {
                let mut c = Command::new("taskset");
                c.args(["-c", core]).arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.args(args).envs(env.iter().copied()).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        self.net.host(host).enter(&mut cmd)?;
        let child = cmd.spawn().with_context(|| format!("starting {} on {host}", program.display()))?;
        if let Some(mut old) = self.procs.insert(name, child) {
            let _ = old.kill();
            let _ = old.wait();
        }
        Ok(())
    }

    /// Kills the process `name` (a host's own: the host's name).
    pub fn kill(&mut self, name: &str) -> anyhow::Result<()> {
        let child = self.procs.get_mut(name).with_context(|| format!("no process {name}"))?;
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    pub fn signal(&self, host: &str, signal: i32) -> anyhow::Result<()> {
        let child = self.procs.get(host).with_context(|| format!("no process on {host}"))?;
        // SAFETY: kill(2) on the pid of a child this process started and has not reaped.
        if unsafe { libc::kill(child.id() as i32, signal) } != 0 {
            bail!("signalling {host}: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn partition(&self, host: &str) -> anyhow::Result<()> {
        self.net.partition(self.net.host(host))
    }

    pub fn heal(&self, host: &str) -> anyhow::Result<()> {
        self.net.heal(self.net.host(host))
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for child in self.procs.values_mut() {
            // (A paused process dies of SIGKILL too.)
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until `check` passes, for at most `within`; its last complaint otherwise.
pub fn wait_until(within: Duration, mut check: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < within {
        match check() {
            Ok(()) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("not settled within {within:?}: {last}")
}

/// Whether each group's two servers are one primary and one replica following it, and a
/// write through `target` to each group's first slots is confirmed by a replica.
pub fn groups_settled(groups: &[[String; 2]], target: &Target) -> anyhow::Result<()> {
    for group in groups {
        let roles: Vec<(String, String)> = group.iter().map(|a| role(a)).collect::<anyhow::Result<_>>()?;
        let masters = roles.iter().filter(|(r, _)| r == "master").count();
        let following = roles.iter().filter(|(r, link)| r == "slave" && link == "up").count();
        if (masters, following) != (1, 1) {
            bail!("roles of {group:?}: {roles:?}");
        }
    }
    let mut c = target.connect()?;
    for key in probe_keys(groups.len()) {
        match c.request(&[b"SET", key.as_bytes(), b"1"])? {
            Reply::Status(_) => {}
            other => bail!("SET {key}: {other:?}"),
        }
        match c.request(&[b"WAIT", b"1", b"1000"])? {
            Reply::Int(n) if n >= 1 => {}
            other => bail!("WAIT after SET {key}: {other:?}"),
        }
    }
    Ok(())
}

/// A key in each of `groups` equal shares of the slots (the map a console starts with).
fn probe_keys(groups: usize) -> Vec<String> {
    let share = terrace_commands::slots::SLOTS / groups.max(1);
    let mut keys = vec![String::new(); groups];
    let mut n = 0;
    while keys.iter().any(String::is_empty) {
        let key = format!("faults:probe:{n}");
        let group = (terrace_commands::slots::key_slot(key.as_bytes()) as usize / share).min(groups - 1);
        if keys[group].is_empty() {
            keys[group] = key;
        }
        n += 1;
    }
    keys
}

/// A server's role and, for a replica, its link to the master (INFO replication).
fn role(addr: &str) -> anyhow::Result<(String, String)> {
    let mut c = Client::connect_with_timeout(addr, Duration::from_secs(1))?;
    let info = match c.request(&[b"INFO", b"replication"])? {
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        other => bail!("INFO on {addr}: {other:?}"),
    };
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).unwrap_or("").trim().to_string();
    Ok((field("role"), field("master_link_status")))
}

/// Each key's value, read through `target`.
pub fn read_all(target: &Target, keys: &[String]) -> anyhow::Result<HashMap<String, Option<String>>> {
    let mut c = target.connect()?;
    let mut out = HashMap::with_capacity(keys.len());
    for key in keys {
        let value = match c.request(&[b"GET", key.as_bytes()])? {
            Reply::Bulk(v) => v.map(|v| String::from_utf8_lossy(&v).into_owned()),
            other => bail!("GET {key}: {other:?}"),
        };
        out.insert(key.clone(), value);
    }
    Ok(out)
}

/// Waits until something listens on `addr`.
pub fn wait_port(addr: &str) -> anyhow::Result<()> {
    let sock: std::net::SocketAddr = addr.parse()?;
    wait_until(Duration::from_secs(30), || {
        std::net::TcpStream::connect_timeout(&sock, Duration::from_millis(200)).with_context(|| format!("nothing listens on {addr} (see its log)"))?;
        Ok(())
    })
}
