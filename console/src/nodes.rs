//! Talking to proxies and engines: admin commands over RESP (the `redis` crate), with
//! timeouts, so that a node that is down or slow costs the console a bounded wait.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use terrace_commands::credentials::EngineAuth;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{}: {}", .addr, describe(.source))]
    Redis { addr: String, source: redis::RedisError },
    /// What answers there did not prove it holds the password of an engine at that address:
    /// it is not told the password, nor anything else.
    #[error("{addr}: not an engine of this appliance (its TERRACE.PROVE answer does not hold for this address)")]
    Unproven { addr: String },
}

impl NodeError {
    /// The node answered, with an error that says it is alive but occupied (a script past
    /// the busy threshold, a snapshot loading): not a node that is down.
    pub fn answered_busy(&self) -> bool {
        match self {
            NodeError::Redis { source, .. } => matches!(source.code(), Some("BUSY" | "LOADING")),
            NodeError::Unproven { .. } => false,
        }
    }
}

/// A node's error for a person: the engine's own error text (its code when it has one, as
/// `OOM …` or `TRYAGAIN …`, without the client library's kind names), else what went wrong
/// with the connection.
fn describe(e: &redis::RedisError) -> String {
    let generic = e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError);
    match (e.code(), e.detail()) {
        (_, Some(detail)) if generic => detail.to_string(),
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ if e.is_timeout() => "no answer in time".to_string(),
        _ if e.is_connection_refusal() => "connection refused".to_string(),
        _ if e.is_io_error() || e.is_connection_dropped() => format!("connection failed: {e}"),
        _ => e.to_string(),
    }
}

pub struct Node {
    pub addr: String,
    conn: MultiplexedConnection,
}

/// The console's links over TLS (`tls_nodes`): one setting of the process, set at start
/// before any node is reached, as the crypto provider is — rather than a parameter of each
/// of the many places that reach a node.
static NODE_TLS: std::sync::OnceLock<terrace_tls::LinkTls> = std::sync::OnceLock::new();

/// Puts every link to engines and proxies on TLS (`tls_nodes`; once, at start).
pub fn use_tls(tls: terrace_tls::LinkTls) {
    let _ = NODE_TLS.set(tls);
}

/// A client for `addr`: plain, or over TLS verified against `tls_ca_cert_file` and showing
/// the console's certificate. The files are read at each connection, so renewed ones are
/// used from the next.
fn client_for(addr: &str) -> redis::RedisResult<redis::Client> {
    let Some(tls) = NODE_TLS.get() else { return redis::Client::open(format!("redis://{addr}/")) };
    let (ca, identity) = tls.files();
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| redis::RedisError::from(std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))));
    let client_tls = match identity {
        Some((cert, key)) => Some(redis::ClientTlsConfig { client_cert: read(cert)?, client_key: read(key)? }),
        None => None,
    };
    redis::Client::build_with_tls(format!("rediss://{addr}/"), redis::TlsCertificates { client_tls, root_cert: Some(read(ca)?) })
}

const CONNECT: Duration = Duration::from_secs(2);

impl Node {
    /// Connects; `reply_timeout` bounds every command (a retraining run waits long).
    pub async fn connect(addr: &str, reply_timeout: Duration) -> Result<Node, NodeError> {
        Self::connect_within(addr, CONNECT, reply_timeout).await
    }

    async fn connect_within(addr: &str, connect: Duration, reply_timeout: Duration) -> Result<Node, NodeError> {
        let wrap = |source| NodeError::Redis { addr: addr.to_string(), source };
        let client = client_for(addr).map_err(wrap)?;
        let config = AsyncConnectionConfig::new().set_connection_timeout(Some(connect)).set_response_timeout(Some(reply_timeout));
        let conn = client.get_multiplexed_async_connection_with_config(&config).await.map_err(wrap)?;
        Ok(Node { addr: addr.to_string(), conn })
    }

    /// An engine, authenticated as `auth` says (`engine_key_file`: once it proved it is
    /// the appliance's engine at `addr`).
    pub async fn engine(addr: &str, auth: &EngineAuth) -> Result<Node, NodeError> {
        Self::engine_waiting(addr, auth, Duration::from_secs(5)).await
    }

    /// As `engine`, waiting up to `reply_timeout` for each reply.
    pub async fn engine_waiting(addr: &str, auth: &EngineAuth, reply_timeout: Duration) -> Result<Node, NodeError> {
        let mut n = Self::connect(addr, reply_timeout).await?;
        n.authenticate(auth).await?;
        Ok(n)
    }

    /// An engine the coordinator checks: connecting and each reply within `bound` (a node
    /// that does not answer that fast counts as down for this check).
    pub async fn engine_bounded(addr: &str, auth: &EngineAuth, bound: Duration) -> Result<Node, NodeError> {
        let mut n = Self::connect_within(addr, bound, bound).await?;
        n.authenticate(auth).await?;
        Ok(n)
    }

    /// With per-engine passwords, the engine first proves it holds the one of this address
    /// (an impostor there, relaying the nonce to a real engine, gets back that engine's
    /// proof, for another address); then AUTH.
    async fn authenticate(&mut self, auth: &EngineAuth) -> Result<(), NodeError> {
        if auth.proves() {
            let nonce = terrace_commands::credentials::nonce();
            let answer: Vec<u8> = self.run(&["TERRACE.PROVE", &nonce]).await?;
            if !auth.proof_holds(&self.addr, nonce.as_bytes(), &answer) {
                return Err(NodeError::Unproven { addr: self.addr.clone() });
            }
        }
        if let Some(p) = auth.password_for(&self.addr) {
            self.run::<()>(&["AUTH", &p]).await?;
        }
        Ok(())
    }

    /// A proxy, authenticated as its admin user.
    pub async fn proxy(addr: &str, admin_password: Option<&str>) -> Result<Node, NodeError> {
        let mut n = Self::connect(addr, Duration::from_secs(5)).await?;
        if let Some(p) = admin_password {
            n.run::<()>(&["AUTH", "admin", p]).await?;
        }
        Ok(n)
    }

    pub async fn run<T: redis::FromRedisValue>(&mut self, args: &[&str]) -> Result<T, NodeError> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query_async(&mut self.conn).await.map_err(|source| NodeError::Redis { addr: self.addr.clone(), source })
    }

    /// Several commands in one round trip; each one's reply (an error reply as an error).
    pub async fn pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> Result<Vec<redis::Value>, NodeError> {
        pipe_of(commands).query_async(&mut self.conn).await.map_err(|source| NodeError::Redis { addr: self.addr.clone(), source })
    }

    /// Several commands in one round trip; each one's reply or error reply on its own.
    pub async fn pipeline_each<T: redis::FromRedisValue>(&mut self, commands: &[Vec<Vec<u8>>]) -> Result<Vec<redis::RedisResult<T>>, NodeError> {
        pipe_of(commands).ignore_errors().query_async(&mut self.conn).await.map_err(|source| NodeError::Redis { addr: self.addr.clone(), source })
    }

    /// A command answering JSON in a bulk string.
    pub async fn json(&mut self, args: &[&str]) -> Result<serde_json::Value, NodeError> {
        let text: String = self.run(args).await?;
        Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
    }

    /// INFO as field → value.
    pub async fn info(&mut self, section: &str) -> Result<HashMap<String, String>, NodeError> {
        let text: String = self.run(&["INFO", section]).await?;
        Ok(parse_info(&text))
    }
}

pub fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.trim().to_string())).collect()
}

/// `commands` (each its name and arguments) as one pipeline.
fn pipe_of(commands: &[Vec<Vec<u8>>]) -> redis::Pipeline {
    let mut p = redis::pipe();
    for c in commands {
        let mut cmd = redis::cmd(std::str::from_utf8(&c[0]).unwrap_or("PING"));
        for a in &c[1..] {
            cmd.arg(a.as_slice());
        }
        p.add_command(cmd);
    }
    p
}

#[cfg(test)]
mod tests {
    #[test]
    fn info_fields() {
        let m = super::parse_info("# Server\r\nrun_id:abc\r\nused_memory:12\r\n\r\n# Stats\r\nkeyspace_hits:3\r\n");
        assert_eq!(m["run_id"], "abc");
        assert_eq!(m["keyspace_hits"], "3");
        assert_eq!(m.len(), 3);
    }
}
