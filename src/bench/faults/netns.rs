//! Hosts for the fault suite: Linux network namespaces this process makes, one per "host",
//! each with a veth into a switch (a bridge in a namespace of its own, so the machine's own
//! firewall never sees the traffic) and an address of its own on a private /24. This
//! process reaches every host through a veth of its own into the switch. A partition sets
//! the switch's end of a host's link down: everything it was connected to stops hearing
//! from it, with no reset, as when a cable or a switch port fails. Nothing leaves the
//! machine. Needs root (`ip netns`, from iproute2).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context};

/// Networks made by this process so far (names and subnets stay apart).
static MADE: AtomicU32 = AtomicU32::new(0);

/// A switch and the hosts plugged into it; all of it removed on drop.
pub struct Net {
    prefix: String,
    switch: String,
    hosts: Vec<Host>,
}

/// One host: a network namespace, its address, and the switch's end of its link.
#[derive(Clone)]
pub struct Host {
    pub name: String,
    pub ip: String,
    namespace: String,
    port_on_switch: String,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output().context("running ip (apt-get install iproute2)")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Removes namespaces an earlier run left behind when it was killed (their names carry the
/// pid of a process that is gone).
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name.strip_prefix("tf").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

impl Net {
    /// A switch with `names.len()` hosts, named as given (at most 200).
    pub fn new(names: &[&str]) -> anyhow::Result<Net> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("the fault suite makes network namespaces: run it as root");
        }
        remove_stale();
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Interface names are at most 15 bytes: "tf" + pid (≤ 7) + net + "u" or "h" + index.
        let prefix = format!("tf{pid}-{n}");
        let short = format!("tf{}{}", pid % 100_000, n % 100);
        let subnet = format!("10.{}.{}", 100 + pid % 100, n % 250);
        let switch = format!("{prefix}-sw");
        let mut net = Net { prefix, switch: switch.clone(), hosts: Vec::new() };
        ip(&["netns", "add", &switch])?;
        ip(&["-n", &switch, "link", "add", "name", "sw0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "sw0", "up"])?;
        // This process's own link: an address in the subnet, the switch's end in the bridge
        // (removed with the switch's namespace).
        let uplink = format!("{short}u");
        ip(&["link", "add", "name", &uplink, "type", "veth", "peer", "name", "up0", "netns", &switch])?;
        ip(&["-n", &switch, "link", "set", "up0", "master", "sw0", "up"])?;
        ip(&["addr", "add", &format!("{subnet}.1/24"), "dev", &uplink])?;
        ip(&["link", "set", &uplink, "up"])?;
        for (i, name) in names.iter().enumerate() {
            let namespace = format!("{}-{name}", net.prefix);
            let port_on_switch = format!("p{i}");
            ip(&["netns", "add", &namespace])?;
            ip(&["-n", &namespace, "link", "set", "lo", "up"])?;
            ip(&["-n", &namespace, "link", "add", "name", "eth0", "type", "veth", "peer", "name", &port_on_switch, "netns", &switch])?;
            let host_ip = format!("{subnet}.{}", 10 + i);
            ip(&["-n", &namespace, "addr", "add", &format!("{host_ip}/24"), "dev", "eth0"])?;
            ip(&["-n", &namespace, "link", "set", "eth0", "up"])?;
            ip(&["-n", &switch, "link", "set", &port_on_switch, "master", "sw0", "up"])?;
            net.hosts.push(Host { name: name.to_string(), ip: host_ip, namespace, port_on_switch });
        }
        Ok(net)
    }

    pub fn host(&self, name: &str) -> &Host {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no host {name} in this network"))
    }

    /// Cuts `host` off from every other host and from this process.
    pub fn partition(&self, host: &Host) -> anyhow::Result<()> {
        ip(&["-n", &self.switch, "link", "set", &host.port_on_switch, "down"])
    }

    /// Plugs `host` back in.
    pub fn heal(&self, host: &Host) -> anyhow::Result<()> {
        ip(&["-n", &self.switch, "link", "set", &host.port_on_switch, "up"])
    }
}

impl Host {
    /// Makes `cmd` run in this host's namespace (and die with this process).
    pub fn enter(&self, cmd: &mut Command) -> anyhow::Result<()> {
        let namespace = File::open(format!("/run/netns/{}", self.namespace)).with_context(|| format!("opening the namespace of {}", self.name))?;
        // SAFETY: setns and prctl are async-signal-safe system calls, as pre_exec requires;
        // the namespace's file stays open in the closure (moved into it) until the exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        Ok(())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // A namespace's interfaces go with it, and a veth with either end.
        for h in &self.hosts {
            let _ = ip(&["netns", "del", &h.namespace]);
        }
        let _ = ip(&["netns", "del", &self.switch]);
    }
}
