//! The console's REST API from a benchmark's process: logged in through its form, over
//! HTTP/1.1 by hand (the benchmarks need three calls; no HTTP client crate is built into
//! the binary for them).

use std::io::{Read, Write};

use anyhow::{bail, Context};

/// The console's API as a benchmark uses it: a session (logged in through the form) and
/// its CSRF token, over HTTP/1.1 on a fresh connection per request.
pub struct Web {
    addr: String,
    cookie: String,
    csrf: String,
}

impl Web {
    /// Logs in as `admin` to the console at `addr` (host:port).
    pub fn login(addr: &str, password: &str) -> anyhow::Result<Web> {
        let mut web = Web { addr: addr.to_string(), cookie: String::new(), csrf: String::new() };
        let (_, page) = web.http("GET", "/login", None)?;
        let csrf = csrf_of(&page)?;
        let form = format!("csrf={csrf}&user=admin&password={password}");
        let (status, _) = web.http("POST", "/login", Some(("application/x-www-form-urlencoded", &form)))?;
        if status != 303 {
            bail!("logging in to the console: {status}");
        }
        let (_, page) = web.http("GET", "/tokens", None)?;
        web.csrf = csrf_of(&page)?;
        Ok(web)
    }

    /// One API call with a JSON body (none when empty): its status and body.
    pub fn call(&self, method: &str, path: &str, json: &str) -> anyhow::Result<(u16, String)> {
        let mut me = Web { addr: self.addr.clone(), cookie: self.cookie.clone(), csrf: self.csrf.clone() };
        me.http(method, path, (!json.is_empty()).then_some(("application/json", json)))
    }

    fn http(&mut self, method: &str, path: &str, body: Option<(&str, &str)>) -> anyhow::Result<(u16, String)> {
        let mut s = std::net::TcpStream::connect(&self.addr)?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.addr);
        if !self.cookie.is_empty() {
            req += &format!("Cookie: {}\r\nX-CSRF-Token: {}\r\n", self.cookie, self.csrf);
        }
        match body {
            Some((kind, b)) => req += &format!("Content-Type: {kind}\r\nContent-Length: {}\r\n\r\n{b}", b.len()),
            None => req += "\r\n",
        }
        s.write_all(req.as_bytes())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status: u16 = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).context("an HTTP status")?;
        for line in head.lines() {
            if let Some(v) = line.strip_prefix("set-cookie: ").or_else(|| line.strip_prefix("Set-Cookie: ")) {
                if let Some((name, value)) = v.split(';').next().and_then(|p| p.split_once('=')) {
                    let mut jar: Vec<(String, String)> = self
                        .cookie
                        .split("; ")
                        .filter_map(|c| c.split_once('='))
                        .filter(|(n, _)| *n != name)
                        .map(|(n, v)| (n.to_string(), v.to_string()))
                        .collect();
                    if !value.is_empty() {
                        jar.push((name.to_string(), value.to_string()));
                    }
                    self.cookie = jar.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join("; ");
                }
            }
        }
        let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_string() };
        Ok((status, body))
    }
}

fn csrf_of(page: &str) -> anyhow::Result<String> {
    let at = page.find("name=\"csrf\" value=\"").context("a form with a CSRF token")? + 19;
    Ok(page[at..].split('"').next().unwrap_or_default().to_string())
}

/// A chunked HTTP body, joined.
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out += &rest[..n];
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
