//! For tests: an etcd member of its own (Debian's `etcd-server`), in a temporary directory
//! on free ports, killed when dropped; restartable on the same data and port (a member
//! that died and came back).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Member {
    child: Option<Child>,
    dir: PathBuf,
    pub port: u16,
    peer: u16,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Member {
    /// Starts a one-member cluster; panics (naming the package) when etcd cannot start.
    pub fn start() -> Member {
        let (port, peer) = (free_port().expect("a free port"), free_port().expect("a free port"));
        let dir = std::env::temp_dir().join(format!("terrace-etcd-{}-{port}", std::process::id()));
        let mut member = Member { child: None, dir, port, peer };
        member.restart();
        member
    }

    /// `host:port`, as clients name it.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the member (SIGKILL); `restart` brings it back on its data.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts (again) on the same data directory and ports; waits until it listens.
    pub fn restart(&mut self) {
        self.kill();
        let client_url = format!("http://127.0.0.1:{}", self.port);
        let peer_url = format!("http://127.0.0.1:{}", self.peer);
        let child = Command::new("etcd")
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args(["--name", "t", "--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url, "--initial-cluster", &format!("t={peer_url}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start etcd (Debian's etcd-server; tests/run.sh installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not listen on {}", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
