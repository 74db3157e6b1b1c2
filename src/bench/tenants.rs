//! `terrace bench tenants`: what a tenant costs. `terrace up` on its defaults, N tenants
//! created through the REST API one after another (each answered once the proxies and
//! engines have it), a sample of them used through the proxy, the console's pages read, and
//! every tenant deleted: the time of each creation and deletion, each process's memory with
//! no tenant, N tenants never used and the sample used, and the pages' times at N tenants.
//! (No system it is compared with has tenants: Redis's ACL users share one keyspace.)

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;

use super::console_web::Web;
use super::resp_client::Client;

#[derive(Args)]
pub struct TenantsArgs {
    /// Tenants to create.
    #[arg(long, default_value_t = 1000)]
    tenants: usize,
    /// Of those, every this many is used through the proxy (AUTH, SET, GET).
    #[arg(long, default_value_t = 10)]
    use_every: usize,
    /// Where `terrace up` keeps its data (emptied first).
    #[arg(long, default_value = "/tmp/terrace-bench-tenants")]
    dir: PathBuf,
    /// The `terrace` binary whose `up` is measured (default: this one), e.g. an older
    /// build to compare with; `TERRACE_NAMESPACES` in the environment reaches its engines.
    #[arg(long)]
    terrace: Option<PathBuf>,
}

/// `terrace up` running; stopped (SIGINT, as Ctrl-C) when dropped.
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the pid of our child, not reaped yet.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let _ = self.0.wait();
    }
}

const ADMIN: &str = "bench-tenants-admin";

pub fn run(args: TenantsArgs) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(&args.dir);
    std::fs::create_dir_all(&args.dir)?;
    let exe = match &args.terrace {
        Some(bin) => bin.clone(),
        None => std::env::current_exe()?,
    };
    let console_port = super::free_port()?;
    let engine_port =
        (20000..60000).step_by(7).find(|p| (0..2).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok())).context("no two free ports")?;
    let mut child = Command::new(&exe)
        .args(["up", "--port", "0", "--memcache-port", "0", "--metrics-port", "0", "--engine-port", &engine_port.to_string()])
        .args(["--console-port", &console_port.to_string(), "--data-dir"])
        .arg(&args.dir)
        .env("TERRACE_ADMIN_PASSWORD", ADMIN)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(args.dir.join("up.log"))?)
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("up's stdout")?).read_line(&mut line)?;
    let up = Up(child);
    let proxy: u16 = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).with_context(|| format!("terrace up did not start: {line:?}"))?;
    super::wait_port(console_port)?;
    let engines: Vec<u32> = (0..2).map(|i| pid_listening(engine_port + i)).collect::<anyhow::Result<_>>()?;
    let web = Web::login(&format!("127.0.0.1:{console_port}"), ADMIN)?;
    // (The console's first passes settle.)
    std::thread::sleep(Duration::from_secs(2));
    let memory = |label: &str| {
        let mut row = vec![label.to_string(), mb(super::rss(up.0.id()).0)];
        row.extend(engines.iter().map(|&pid| mb(super::rss(pid).0)));
        row
    };
    let mut table = vec![memory("no tenant")];

    let mut created = Vec::with_capacity(args.tenants);
    for i in 0..args.tenants {
        let at = Instant::now();
        let (status, body) = web.call("POST", "/api/v1/tenants", &format!("{{\"name\":\"t{i}\",\"password\":\"pw-{i}\"}}"))?;
        if status != 201 {
            bail!("creating tenant t{i}: {status} {body}");
        }
        created.push(at.elapsed().as_secs_f64() * 1000.0);
    }
    std::thread::sleep(Duration::from_secs(2));
    table.push(memory(&format!("{} tenants, unused", args.tenants)));

    let used: Vec<usize> = (0..args.tenants).step_by(args.use_every.max(1)).collect();
    for &i in &used {
        let mut c = Client::connect(proxy)?;
        let (name, password, key) = (format!("t{i}"), format!("pw-{i}"), format!("k{i}"));
        c.call(&[b"AUTH", name.as_bytes(), password.as_bytes()]).with_context(|| format!("AUTH as {name}"))?;
        c.call(&[b"SET", key.as_bytes(), b"v"])?;
        if c.call(&[b"GET", key.as_bytes()])?.as_deref() != Some("v") {
            bail!("tenant {name} does not read back its key");
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    table.push(memory(&format!("{} of them used", used.len())));

    let mut pages = Vec::new();
    for path in ["/api/v1/tenants", "/api/v1/topology", "/tenants", "/"] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let at = Instant::now();
            let (status, _) = web.call("GET", path, "")?;
            if status != 200 {
                bail!("GET {path}: {status}");
            }
            times.push(at.elapsed().as_secs_f64() * 1000.0);
        }
        pages.push((path, super::median(&times)));
    }

    let mut deleted = Vec::with_capacity(args.tenants);
    for i in (0..args.tenants).rev() {
        let at = Instant::now();
        let (status, body) = web.call("DELETE", &format!("/api/v1/tenants/t{i}"), "")?;
        if status != 200 {
            bail!("deleting tenant t{i}: {status} {body}");
        }
        deleted.push(at.elapsed().as_secs_f64() * 1000.0);
    }
    table.push(memory("all deleted"));
    drop(up);

    println!("\nMemory (VmRSS): terrace up (proxy and console) and its two engines\n");
    println!("| state | proxy + console | engine 1 | engine 2 |\n|---|---|---|---|");
    for row in &table {
        println!("| {} |", row.join(" | "));
    }
    println!("\nAPI calls, ms (each answered once the proxy and both engines have the change)\n");
    println!("| call | first 100, median | last 100, median | p99 | all |\n|---|---|---|---|---|");
    for (what, times) in [("create a tenant", &created), ("delete a tenant", &deleted)] {
        let n = times.len();
        let (first, last) = (&times[..n.min(100)], &times[n.saturating_sub(100)..]);
        let total: f64 = times.iter().sum();
        println!("| {what} | {:.1} | {:.1} | {:.1} | {:.1} s |", super::median(first), super::median(last), percentile(times, 0.99), total / 1000.0);
    }
    println!("\nConsole reads at {} tenants, ms (median of 5)\n", args.tenants);
    println!("| GET | ms |\n|---|---|");
    for (path, ms) in pages {
        println!("| {path} | {ms:.1} |");
    }
    Ok(())
}

/// The process listening on `port` (an engine `terrace up` started).
fn pid_listening(port: u16) -> anyhow::Result<u32> {
    super::wait_port(port)?;
    let inode = std::fs::read_to_string("/proc/net/tcp")?
        .lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok())?;
            (local_port == port && f.get(3) == Some(&"0A")).then(|| f.get(9).map(|s| s.to_string()))?
        })
        .with_context(|| format!("nothing listens on {port}"))?;
    let socket = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        if fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == socket)) {
            return Ok(pid);
        }
    }
    bail!("no process holds the socket listening on {port}")
}

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1))).copied().unwrap_or(0.0)
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / (1 << 20) as f64)
}
