//! Helpers for end-to-end tests: start the real `terrace` binary on an ephemeral port and
//! talk to it over raw sockets.

#![allow(dead_code)]

pub mod console_api;
pub mod requests;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A running `terrace engine` with its own data directory; killed (and the directory
/// removed) on drop.
pub struct Engine {
    pub child: Child,
    pub port: u16,
    pub data_dir: PathBuf,
}

/// Makes a server started by a test die with the test process, so a test killed by a timeout
/// (which skips `Drop`) leaves no server running.
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!("terrace-test-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Engine {
    pub fn start(extra: &[&str]) -> Engine {
        Self::start_with_env(extra, &[])
    }

    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Engine {
        Self::start_in(&temp_dir("engine"), extra, env)
    }

    /// Starts an engine on `data_dir` (which it keeps; a restart test reuses it).
    pub fn start_in(data_dir: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> Engine {
        let mut cmd = Self::command(0, data_dir);
        cmd.args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::spawn(cmd, data_dir)
    }

    /// Stops the engine cleanly (SIGTERM, as systemd does) and waits for it to exit.
    pub fn stop(&mut self) {
        // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(start.elapsed() < Duration::from_secs(30), "the engine did not stop within 30 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the engine cleanly and starts a new one on the same data directory.
    pub fn restart_clean(&mut self, extra: &[&str]) {
        self.stop();
        let dir = self.data_dir.clone();
        let next = Engine::start_in(&dir, extra, &[]);
        let old = std::mem::replace(self, next);
        std::mem::forget(old);
    }

    /// Kills the engine (no shutdown work) and starts a new one on the same data directory.
    pub fn restart(&mut self, extra: &[&str]) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = self.data_dir.clone();
        let next = Engine::start_in(&dir, extra, &[]);
        let old = std::mem::replace(self, next);
        std::mem::forget(old); // its process is gone and its directory is ours now
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// A server Redis clients connect to (an engine, a proxy).
pub trait RedisPort {
    fn redis_port(&self) -> u16;

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.redis_port())
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(self.url()).unwrap().get_connection().unwrap()
    }

    fn raw(&self) -> Raw {
        Raw::connect(self.redis_port())
    }
}

impl RedisPort for Engine {
    fn redis_port(&self) -> u16 {
        self.port
    }
}

impl RedisPort for Proxy {
    fn redis_port(&self) -> u16 {
        self.port
    }
}

/// A raw TCP connection for byte-level protocol tests.
pub struct Raw {
    pub s: TcpStream,
}

impl Raw {
    /// Connects to 127.0.0.1:`port` with a 5 s read timeout.
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw { s }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// Reads until exactly `expected` has arrived (or panics with what did).
    pub fn expect(&mut self, expected: &[u8]) {
        let got = self.read_n(expected.len());
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expected));
    }

    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match self.s.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) => panic!("read failed after {got} bytes ({:?}): {e}", String::from_utf8_lossy(&buf[..got])),
            }
        }
        buf.truncate(got);
        buf
    }

    /// Sends a command as a RESP array and returns the raw reply bytes available within a
    /// short time.
    pub fn cmd(&mut self, args: &[&str]) -> String {
        self.send(&encode(args));
        self.read_available()
    }

    pub fn read_available(&mut self) -> String {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        self.s.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
        let mut buf = [0u8; 65536];
        loop {
            match self.s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => out.extend_from_slice(&buf[..k]),
                Err(_) if !out.is_empty() || Instant::now() > deadline => break,
                Err(_) => {}
            }
        }
        self.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// True when the server closed the connection after whatever it had sent (read and
    /// dropped).
    pub fn closes_after_output(&mut self) -> bool {
        self.s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = vec![0u8; 1 << 16];
        loop {
            match self.s.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
    }

    /// True when the server closed the connection.
    pub fn is_closed(&mut self) -> bool {
        self.s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0) | Err(_))
    }
}

pub fn encode(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n{}\r\n", a.len(), a).as_bytes());
    }
    v
}

/// A redis-server 7.0 (Debian package; `tests/run.sh` installs it) on an ephemeral port with
/// its own directory, killed on drop.
pub struct RedisServer {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn start_redis() -> RedisServer {
    start_redis_with(&[])
}

/// A redis-server with extra arguments (`--replicaof host port`…).
pub fn start_redis_with(extra: &[&str]) -> RedisServer {
    let port = free_port();
    let dir = temp_dir("redis");
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--dir"]).arg(&dir).args(extra).stdout(Stdio::null()).stderr(Stdio::null());
    die_with_parent(&mut cmd);
    let child = cmd.spawn().expect("redis-server not found: run tests/run.sh, which installs it");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    RedisServer { child, port, dir }
}

impl RedisServer {
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap().get_connection().unwrap()
    }
}

/// A free TCP port for a server a test starts on a port it names (see `free_ports`).
pub fn free_port() -> u16 {
    free_ports(1)
}

/// Ports `start_up` callers reserve from `--engine-port` on: `terrace up`'s engines, their
/// replicas, and the engines its console adds (placed on the free ports after them).
pub const UP_PORTS: u16 = 8;

/// The first of `n` consecutive TCP ports, free now and handed to no other caller in this
/// test process (`terrace up`'s engines, replicas and metrics take consecutive ports).
///
/// Ports a test names must lie outside the kernel's ephemeral range: a port found free there
/// (`bind` to port 0, then released) is the local port the next outgoing connection of any
/// test running alongside may take — Linux even prefers the port after an odd `bind(0)` one
/// for `connect` — and the server started on it then fails to listen. So they come from a
/// window below that range, in turn (one counter per process; each test binary starts at its
/// own place in the window), each checked free by binding it.
pub fn free_ports(n: u16) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static WINDOW: std::sync::OnceLock<(u16, u16)> = std::sync::OnceLock::new();
    let &(lo, hi) = WINDOW.get_or_init(test_port_window);
    let span = u32::from(hi - lo);
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let offset = (start + NEXT.fetch_add(u32::from(n), Ordering::Relaxed)) % span;
        let first = lo as u32 + offset;
        if first + u32::from(n) > u32::from(hi) {
            continue;
        }
        let first = first as u16;
        if (first..first + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return first;
        }
    }
    panic!("no {n} consecutive free ports in {lo}..{hi}");
}

/// Where `free_ports` takes ports: from 20000 up to the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768 by default), or above it when it starts too low.
fn test_port_window() -> (u16, u16) {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = range.split_whitespace().filter_map(|v| v.parse::<u16>().ok());
    let (ephemeral_lo, ephemeral_hi) = (bounds.next().unwrap_or(32768), bounds.next().unwrap_or(60999));
    if ephemeral_lo >= 24000 {
        (20000, ephemeral_lo)
    } else {
        assert!(ephemeral_hi <= 61000, "the ephemeral port range {ephemeral_lo}-{ephemeral_hi} leaves tests no fixed ports");
        (ephemeral_hi + 1, 65000)
    }
}

/// Reads a server's "… ready on HOST:PORT" line and returns the port.
pub fn ready_port(child: &mut Child) -> u16 {
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read ready line");
    line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("unexpected ready line {line:?}"))
}

impl Engine {
    /// Starts an engine on a given port (a restart test brings it back on the same one).
    pub fn start_on(port: u16, data_dir: &std::path::Path) -> Engine {
        Self::start_on_with(port, data_dir, &[])
    }

    /// As `start_on`, with more flags.
    pub fn start_on_with(port: u16, data_dir: &std::path::Path, extra: &[&str]) -> Engine {
        let mut cmd = Self::command(port, data_dir);
        cmd.args(extra);
        Self::spawn(cmd, data_dir)
    }

    /// Starts an engine whose standard error (its log, and any panic message) goes to `log`.
    pub fn start_logged(extra: &[&str], log: &std::path::Path) -> Engine {
        let data_dir = temp_dir("engine");
        let mut cmd = Self::command(0, &data_dir);
        cmd.args(extra).stderr(std::fs::File::create(log).expect("create the engine's log file"));
        Self::spawn(cmd, &data_dir)
    }

    /// Starts an engine whose open-file limit (soft and hard) is `fds`.
    pub fn start_with_fd_limit(fds: u64, extra: &[&str]) -> Engine {
        use std::os::unix::process::CommandExt;
        let data_dir = temp_dir("engine");
        let mut cmd = Self::command(0, &data_dir);
        cmd.args(extra);
        // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(move || {
                let rl = libc::rlimit { rlim_cur: fds, rlim_max: fds };
                libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
                Ok(())
            });
        }
        Self::spawn(cmd, &data_dir)
    }

    /// The engine's resident memory, in bytes.
    pub fn rss(&self) -> u64 {
        rss_of(&self.child)
    }

    /// CPU time the engine has used (user + system), from /proc/PID/stat.
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // Fields after the command name (which may hold spaces) in parentheses.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let (utime, stime): (u64, u64) = (f[11].parse().unwrap(), f[12].parse().unwrap());
        Duration::from_millis((utime + stime) * 1000 / ticks)
    }

    /// `terrace engine` on `port` (0: any) and `data_dir`, its ready line on a pipe and its
    /// log discarded.
    fn command(port: u16, data_dir: &std::path::Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_terrace"));
        cmd.args(["engine", "--port", &port.to_string(), "--data-dir"]).arg(data_dir).stdout(Stdio::piped()).stderr(Stdio::null());
        cmd
    }

    fn spawn(mut cmd: Command, data_dir: &std::path::Path) -> Engine {
        die_with_parent(&mut cmd);
        let mut child = cmd.spawn().expect("start terrace engine");
        let port = ready_port(&mut child);
        Engine { child, port, data_dir: data_dir.to_path_buf() }
    }
}

/// A process's resident memory, in bytes (/proc/PID/status VmRSS).
pub fn rss_of(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap();
    kb * 1024
}

/// A running `terrace proxy` in front of the given engines; killed on drop.
pub struct Proxy {
    pub child: Child,
    pub port: u16,
    pub memcache_port: u16,
    /// The metrics URL when started with `--metrics-port`.
    pub metrics_url: Option<String>,
    /// The TLS ports when started with `--tls-port` / `--memcache-tls-port`.
    pub tls_port: Option<u16>,
    pub memcache_tls_port: Option<u16>,
}

impl Proxy {
    pub fn start(engines: &[&Engine], extra: &[&str], env: &[(&str, &str)]) -> Proxy {
        let list: Vec<String> = engines.iter().map(|e| format!("127.0.0.1:{}", e.port)).collect();
        Self::start_for(&list.join(","), extra, env)
    }

    /// `engines` empty: the engines come from a `--config` file in `extra`.
    pub fn start_for(engines: &str, extra: &[&str], env: &[(&str, &str)]) -> Proxy {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_terrace"));
        cmd.args(["proxy", "--memcache-port", "0"]);
        // An ephemeral port unless the test names one.
        if !extra.contains(&"--port") {
            cmd.args(["--port", "0"]);
        }
        if !engines.is_empty() {
            cmd.args(["--engines", engines]);
        }
        cmd.args(extra).stdout(Stdio::piped()).stderr(Stdio::null());
        die_with_parent(&mut cmd);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start terrace proxy");
        // "… ready on HOST:PORT", "… memcache on HOST:PORT", then a line per TLS port and
        // the metrics URL when asked for.
        let given = |flag: &str| extra.contains(&flag);
        let count = 2 + [given("--tls-port"), given("--memcache-tls-port"), given("--metrics-port")].iter().filter(|g| **g).count();
        let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap()).lines().take(count).map_while(Result::ok).collect();
        let line_of = |prefix: &str| lines.iter().find(|l| l.starts_with(prefix)).map(|l| l.trim().rsplit(' ').next().unwrap_or_default().to_string());
        let port_of = |prefix: &str| line_of(prefix).and_then(|a| a.rsplit(':').next().and_then(|p| p.parse().ok()));
        let port = port_of("terrace proxy ready on").unwrap_or_else(|| panic!("no redis port in {lines:?}"));
        let memcache_port = port_of("terrace proxy memcache on").unwrap_or_else(|| panic!("no memcache port in {lines:?}"));
        Proxy {
            child,
            port,
            memcache_port,
            metrics_url: line_of("terrace proxy metrics on"),
            tls_port: port_of("terrace proxy tls on"),
            memcache_tls_port: port_of("terrace proxy memcache tls on"),
        }
    }

    /// A raw connection to the Memcached port.
    pub fn memcache(&self) -> Raw {
        Raw::connect(self.memcache_port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a command and converts its reply, panicking with the command on failure.
/// A numeric field of an INFO section (panics, naming it, if absent).
pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> u64 {
    info_text(con, section, field).parse().unwrap_or_else(|e| panic!("INFO {field}: {e}"))
}

/// A field of INFO `section`, as text.
pub fn info_text(con: &mut redis::Connection, section: &str, field: &str) -> String {
    let text: String = q(con, &["INFO", section]);
    let value = text.lines().find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')));
    value.unwrap_or_else(|| panic!("INFO {section} has no {field}: {text}")).trim().to_string()
}

pub fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a command that must fail and returns the error text.
pub fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<redis::Value>(con) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
    }
}

/// A real PostgreSQL (Debian's package) in a temporary directory on a free port, started with
/// `initdb` + `pg_ctl` as the `postgres` user when we run as root (PostgreSQL refuses root);
/// stopped and removed on drop.
pub struct Postgres {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
}

impl Postgres {
    fn pg_bin() -> PathBuf {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL is installed (tests/run.sh installs it: apt-get install postgresql)")
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("initdb").exists())
            .collect();
        versions.sort();
        versions.pop().expect("an initdb under /usr/lib/postgresql/*/bin")
    }

    fn as_postgres(&self, program: &str, args: &[&str]) -> std::process::Output {
        let exe = self.bin.join(program);
        // SAFETY: geteuid has no preconditions.
        let mut cmd = if unsafe { libc::geteuid() } == 0 {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args).stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("running {}: {e}", exe.display()))
    }

    pub fn start() -> Postgres {
        let pg = Self::init();
        pg.pg_start();
        pg
    }

    /// A server that takes TCP clients over TLS only (`hostssl` in pg_hba.conf), showing
    /// `cert` and `key`.
    pub fn start_tls(cert: &std::path::Path, key: &std::path::Path) -> Postgres {
        let pg = Self::init();
        let data = pg.dir.join("data");
        std::fs::copy(cert, data.join("server.crt")).unwrap();
        std::fs::copy(key, data.join("server.key")).unwrap();
        let mut conf = std::fs::OpenOptions::new().append(true).open(data.join("postgresql.conf")).unwrap();
        std::io::Write::write_all(&mut conf, b"\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n").unwrap();
        std::fs::write(data.join("pg_hba.conf"), "local all all trust\nhostssl all all 127.0.0.1/32 trust\n").unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let ok = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&data).status().unwrap().success();
            assert!(ok, "chown the PostgreSQL data to postgres");
        }
        pg.pg_start();
        pg
    }

    fn init() -> Postgres {
        let dir = temp_dir("pg");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let ok = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status().unwrap().success();
            assert!(ok, "chown the PostgreSQL directory to postgres");
        }
        let pg = Postgres { port: free_port(), dir, bin: Self::pg_bin() };
        let data = pg.dir.join("data");
        let out = pg.as_postgres("initdb", &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        pg
    }

    fn pg_start(&self) {
        let data = self.dir.join("data");
        let opts = format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.display());
        let log = self.dir.join("log");
        let out = self.as_postgres("pg_ctl", &["-D", data.to_str().unwrap(), "-o", &opts, "-l", log.to_str().unwrap(), "-w", "-t", "60", "start"]);
        assert!(out.status.success(), "pg_ctl start: {} {}", String::from_utf8_lossy(&out.stderr), std::fs::read_to_string(&log).unwrap_or_default());
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts `psql` against this server with `args` (running in the background).
    pub fn psql(&self, args: &[&str]) -> Child {
        Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres", "-q"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run psql")
    }

    /// Stops the server (an outage); `resume` brings it back on the same port and data.
    pub fn stop(&self) {
        let data = self.dir.join("data");
        let _ = self.as_postgres("pg_ctl", &["-D", data.to_str().unwrap(), "-m", "fast", "-w", "stop"]);
    }

    pub fn resume(&self) {
        self.pg_start();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self.as_postgres("pg_ctl", &["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The admin password the console tests' proxies and consoles share.
pub const PROXY_ADMIN_PASSWORD: &str = "proxy-admin-pw";
pub const CONSOLE_ADMIN_PASSWORD: &str = "console-admin-pw";

impl Proxy {
    /// A proxy on a given port with the admin user enabled (the console pushes to it; a
    /// restart test brings it back on the same port).
    pub fn start_admin_on(port: u16, engines: &[&Engine]) -> Proxy {
        Self::start_admin_on_with(port, engines, &[])
    }

    /// As `start_admin_on`, with more flags.
    pub fn start_admin_on_with(port: u16, engines: &[&Engine], extra: &[&str]) -> Proxy {
        let list: Vec<String> = engines.iter().map(|e| format!("127.0.0.1:{}", e.port)).collect();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_terrace"));
        cmd.args(["proxy", "--port", &port.to_string(), "--memcache-port", "0", "--engines", &list.join(",")])
            .args(extra)
            .env("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        die_with_parent(&mut cmd);
        let mut child = cmd.spawn().expect("start terrace proxy");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut port_of = || -> u16 {
            let line = lines.next().and_then(|l| l.ok()).unwrap_or_default();
            line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no port in {line:?}"))
        };
        let port = port_of();
        let memcache_port = port_of();
        Proxy { child, port, memcache_port, metrics_url: None, tls_port: None, memcache_tls_port: None }
    }
}

/// A running `terrace console` with its own database; killed on drop.
pub struct Console {
    pub child: Child,
    pub url: String,
    pub dir: PathBuf,
}

impl Console {
    /// A console over `engines` pushing to `proxies`, reconciling every 300 ms.
    pub fn start(engines: &[&Engine], proxies: &[&Proxy]) -> Console {
        Self::start_with(engines, proxies, &[])
    }

    /// As `start`, with more flags (`--replicas`, `--failover-after-ms`…).
    pub fn start_with(engines: &[&Engine], proxies: &[&Proxy], extra: &[&str]) -> Console {
        Self::start_in(temp_dir("console"), engines, proxies, extra, &[])
    }

    /// As `start_with`, on the database in `dir` (a restart test reuses it), with more
    /// environment.
    pub fn start_in(dir: std::path::PathBuf, engines: &[&Engine], proxies: &[&Proxy], extra: &[&str], env: &[(&str, &str)]) -> Console {
        let list = |ports: Vec<u16>| ports.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
        Self::start_for(dir, &list(engines.iter().map(|e| e.port).collect()), &list(proxies.iter().map(|p| p.port).collect()), extra, env)
    }

    /// As `start_in`, with the engines' and proxies' addresses as given (comma-separated).
    pub fn start_for(dir: std::path::PathBuf, engines: &str, proxies: &str, extra: &[&str], env: &[(&str, &str)]) -> Console {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_terrace"));
        cmd.args(["console", "--port", "0", "--reconcile-ms", "300", "--db"])
            .arg(dir.join("console.db"))
            .args(["--engines", engines])
            .args(["--proxies", proxies])
            .args(extra)
            .env("TERRACE_ADMIN_PASSWORD", CONSOLE_ADMIN_PASSWORD)
            .env("TERRACE_PROXY_ADMIN_PASSWORD", PROXY_ADMIN_PASSWORD)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        die_with_parent(&mut cmd);
        let mut child = cmd.spawn().expect("start terrace console");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = loop {
            let line = lines.next().and_then(|l| l.ok()).expect("the console's ready line");
            if let Some(url) = line.strip_prefix("terrace console ready on ") {
                break url.trim().to_string();
            }
        };
        Console { child, url, dir }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Polls `check` every 100 ms until it holds or `seconds` pass (then panics with `what`).
pub fn eventually(seconds: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {seconds} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A real memcached on an ephemeral port (Debian package; tests/run.sh installs it).
pub struct Memcached {
    pub child: Child,
    pub port: u16,
}

impl Memcached {
    pub fn start() -> Memcached {
        let port = free_port();
        let mut cmd = Command::new("memcached");
        cmd.args(["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1", "-u", "root"]).stdout(Stdio::null()).stderr(Stdio::null());
        die_with_parent(&mut cmd);
        let mut child = cmd.spawn().expect("start memcached (apt-get install memcached)");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Memcached { child, port };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("memcached did not start");
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stops `terrace up` as Ctrl-C does; it must exit cleanly.
pub fn stop_up(mut child: Child) {
    // SAFETY: kill(2) on the pid of the child this test started and has not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert!(child.wait().unwrap().success());
}

/// The password of `terrace up`'s engine at `addr` (127.0.0.1:PORT): derived from the
/// appliance's engine key in `DATA_DIR/engine.secret`, as the console and the proxy do.
pub fn up_engine_password(dir: &std::path::Path, addr: &str) -> String {
    let key = std::fs::read_to_string(dir.join("engine.secret")).unwrap().trim().to_string();
    terrace_commands::credentials::engine_password(&key, addr)
}

/// An operator's connection to `terrace up`'s engine at `addr`, authenticated with its own
/// password.
pub fn up_engine(dir: &std::path::Path, addr: &str) -> redis::RedisResult<redis::Connection> {
    redis::Client::open(format!("redis://:{}@{addr}/", up_engine_password(dir, addr)))?.get_connection()
}

/// Starts `terrace up` on engines from port `first` on (and its console on `console_port`,
/// its admin password `CONSOLE_ADMIN_PASSWORD`) with `extra` flags; answers the process and
/// the proxy's Redis port.
pub fn start_up(dir: &std::path::Path, first: u16, console_port: u16, extra: &[&str]) -> (Child, u16) {
    start_up_with_env(dir, first, console_port, extra, &[])
}

/// `start_up` with environment variables `env` set for `terrace up`.
pub fn start_up_with_env(dir: &std::path::Path, first: u16, console_port: u16, extra: &[&str], env: &[(&str, &str)]) -> (Child, u16) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_terrace"));
    cmd.envs(env.iter().copied());
    cmd.args(["up", "--port", "0", "--engine-port", &first.to_string(), "--console-port", &console_port.to_string(), "--data-dir"])
        .arg(dir)
        .args(extra)
        .args(if extra.contains(&"--memcache-port") { &[][..] } else { &["--memcache-port", "0"][..] })
        // (Metrics off unless the test asks: tests run in parallel, and 9121 is one port.)
        .args(if extra.contains(&"--metrics-port") { &[][..] } else { &["--metrics-port", "0"][..] })
        .env("TERRACE_ADMIN_PASSWORD", CONSOLE_ADMIN_PASSWORD)
        .stdout(Stdio::piped())
        // Kept in the data directory (appended across restarts): a start that fails says why.
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(dir.join("up.stderr")).unwrap());
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    if !line.starts_with("terrace proxy ready on ") {
        let log = std::fs::read_to_string(dir.join("up.stderr")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        panic!("terrace up did not get ready (stdout {line:?}); its stderr ends:\n{}", lines[lines.len().saturating_sub(30)..].join("\n"));
    }
    (child, line.trim().rsplit(':').next().unwrap().parse().unwrap())
}
