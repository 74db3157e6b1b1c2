//! A launcher in another process. `terrace up --consoles N` runs its consoles as processes
//! of their own, but the engines they add must be started, supervised and stopped by the
//! appliance, which outlives any console. The appliance serves its launcher on a Unix
//! socket (`serve`, mode 0600 in its data directory); a console given `launcher_socket`
//! starts and stops engines through it (`SocketLauncher`).
//!
//! One request per connection, one line each way: `start` → `started <address>` or
//! `error <why>`; `stop <address>` → `stopped` or `not mine`. (By hand: two verbs on a
//! local socket; an RPC crate would be larger than the protocol.)

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::Launcher;

/// How long a start may take: the appliance waits up to 60 s for the engine to listen
/// (one loading a large snapshot).
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// Serves `launcher` on a Unix socket at `path` (replacing a stale one; only this user may
/// connect), each request on a thread of its own, for as long as this process runs.
pub fn serve(path: &Path, launcher: Arc<dyn Launcher>) -> std::io::Result<()> {
    // Bound under another name and renamed once only its owner may use it: no moment at
    // which another user could connect.
    let staging = path.with_extension("binding");
    let _ = std::fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging)?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&staging, path)?;
    std::thread::Builder::new().name("terrace-launcher".into()).spawn(move || {
        for stream in listener.incoming().flatten() {
            let launcher = launcher.clone();
            let _ = std::thread::Builder::new().name("terrace-launch".into()).spawn(move || answer(stream, launcher.as_ref()));
        }
    })?;
    Ok(())
}

fn answer(stream: UnixStream, launcher: &dyn Launcher) {
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return;
    }
    let reply = match line.trim_end().split_once(' ').unwrap_or((line.trim_end(), "")) {
        ("start", "") => match launcher.start() {
            Ok(address) => format!("started {address}"),
            Err(why) => format!("error {}", why.replace('\n', " ")),
        },
        ("stop", address) if !address.is_empty() => (if launcher.stop(address) { "stopped" } else { "not mine" }).to_string(),
        _ => format!("error unknown request {:?}", line.trim_end()),
    };
    let _ = (&stream).write_all(format!("{reply}\n").as_bytes());
}

/// The launcher of the process serving `path`.
#[derive(Debug, Clone)]
pub struct SocketLauncher {
    path: PathBuf,
}

impl SocketLauncher {
    pub fn new(path: PathBuf) -> SocketLauncher {
        SocketLauncher { path }
    }

    fn ask(&self, request: &str) -> Result<String, String> {
        let failed = |e: std::io::Error| format!("the launcher at {}: {e}", self.path.display());
        let mut stream = UnixStream::connect(&self.path).map_err(failed)?;
        stream.set_read_timeout(Some(START_TIMEOUT)).map_err(failed)?;
        stream.write_all(format!("{request}\n").as_bytes()).map_err(failed)?;
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).map_err(failed)?;
        Ok(reply.trim_end().to_string())
    }
}

impl Launcher for SocketLauncher {
    fn start(&self) -> Result<String, String> {
        let reply = self.ask("start")?;
        match reply.split_once(' ') {
            Some(("started", address)) => Ok(address.to_string()),
            Some(("error", why)) => Err(why.to_string()),
            _ => Err(format!("the launcher at {} answered {reply:?}", self.path.display())),
        }
    }

    fn stop(&self, address: &str) -> bool {
        self.ask(&format!("stop {address}")).is_ok_and(|reply| reply == "stopped")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Starts "engines" on made-up ports and stops only its own.
    #[derive(Default)]
    struct Counting(Mutex<Vec<String>>);

    impl Launcher for Counting {
        fn start(&self) -> Result<String, String> {
            let mut started = self.0.lock().map_err(|e| e.to_string())?;
            if started.len() == 2 {
                return Err("no free port for another engine\nreally".into());
            }
            let address = format!("127.0.0.1:{}", 7010 + started.len());
            started.push(address.clone());
            Ok(address)
        }

        fn stop(&self, address: &str) -> bool {
            self.0.lock().is_ok_and(|mut s| s.iter().position(|a| a == address).map(|i| s.remove(i)).is_some())
        }
    }

    #[test]
    fn a_console_starts_and_stops_engines_through_the_appliances_socket() {
        let dir = std::env::temp_dir().join(format!("terrace-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("launcher.sock");
        let served = Arc::new(Counting::default());
        serve(&path, served.clone()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "only the appliance's user may start engines");
        let console = SocketLauncher::new(path.clone());
        assert_eq!(console.start(), Ok("127.0.0.1:7010".to_string()));
        assert_eq!(console.start(), Ok("127.0.0.1:7011".to_string()));
        assert_eq!(console.start(), Err("no free port for another engine really".to_string()), "the appliance's reason, on one line");
        assert!(console.stop("127.0.0.1:7010"));
        assert!(!console.stop("127.0.0.1:7010"), "not one of its own any more");
        assert_eq!(*served.0.lock().unwrap(), ["127.0.0.1:7011"]);
        assert_eq!(console.ask("restart everything"), Ok("error unknown request \"restart everything\"".to_string()));
        let gone = SocketLauncher::new(dir.join("nothing.sock"));
        assert!(gone.start().unwrap_err().contains("nothing.sock"), "an unreachable launcher is named");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
