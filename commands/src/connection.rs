//! The connection commands the engine and the proxy both answer themselves, as typed
//! requests parsed once with Redis's error texts: AUTH, HELLO (protocol version, AUTH and
//! SETNAME options) and a client name (CLIENT SETNAME, HELLO SETNAME); and HELLO's reply.

use crate::resp::ReplyWriter;

/// What a HELLO, AUTH or client name was refused for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    #[error("ERR Protocol version is not an integer or out of range")]
    ProtocolNotInteger,
    #[error("NOPROTO unsupported protocol version")]
    UnsupportedProtocol,
    #[error("ERR Syntax error in HELLO option '{0}'")]
    HelloOption(String),
    #[error("ERR Client names cannot contain spaces, newlines or special characters.")]
    ClientName,
    #[error("ERR syntax error")]
    Syntax,
}

/// HELLO's answer when the client is not authenticated after its options.
pub const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";

/// `AUTH [username] password`.
#[derive(Debug, PartialEq, Eq)]
pub struct Auth<'a> {
    /// None: the default user (or, in the proxy, the default tenant).
    pub user: Option<&'a [u8]>,
    pub password: &'a [u8],
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Hello<'a> {
    /// The protocol asked for (2 or 3); None: keep the connection's.
    pub protocol: Option<u8>,
    /// The last AUTH option.
    pub auth: Option<Auth<'a>>,
    /// The last SETNAME option, already checked (`client_name`); empty clears the name.
    pub name: Option<String>,
}

impl<'a> Auth<'a> {
    pub fn parse(argv: &[&'a [u8]]) -> Result<Auth<'a>, ConnectionError> {
        match argv {
            [_, password] => Ok(Auth { user: None, password }),
            [_, user, password] => Ok(Auth { user: Some(user), password }),
            _ => Err(ConnectionError::Syntax),
        }
    }
}

impl<'a> Hello<'a> {
    /// Parses every option before anything is acted on, as Redis does: a bad option
    /// refuses the whole command, whatever AUTH said.
    pub fn parse(argv: &[&'a [u8]]) -> Result<Hello<'a>, ConnectionError> {
        let mut hello = Hello { protocol: None, auth: None, name: None };
        let Some(version) = argv.get(1) else { return Ok(hello) };
        let version: i64 = std::str::from_utf8(version).ok().and_then(|v| v.parse().ok()).ok_or(ConnectionError::ProtocolNotInteger)?;
        hello.protocol = Some(match version {
            2 => 2,
            3 => 3,
            _ => return Err(ConnectionError::UnsupportedProtocol),
        });
        let mut i = 2;
        while i < argv.len() {
            let more = argv.len() - i - 1;
            if argv[i].eq_ignore_ascii_case(b"AUTH") && more >= 2 {
                hello.auth = Some(Auth { user: Some(argv[i + 1]), password: argv[i + 2] });
                i += 3;
            } else if argv[i].eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
                hello.name = Some(client_name(argv[i + 1])?);
                i += 2;
            } else {
                return Err(ConnectionError::HelloOption(String::from_utf8_lossy(argv[i]).into_owned()));
            }
        }
        Ok(hello)
    }
}

/// A client name as CLIENT SETNAME and HELLO SETNAME accept it: printable ASCII without
/// spaces (empty clears the name).
pub fn client_name(name: &[u8]) -> Result<String, ConnectionError> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(ConnectionError::ClientName);
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}

/// HELLO's reply: the server's properties, as Redis 7.0 lists them.
pub fn write_hello(w: &mut ReplyWriter, protocol: u8, client_id: u64) {
    w.map_len(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(crate::REDIS_VERSION.as_bytes());
    w.bulk(b"proto");
    w.int(protocol as i64);
    w.bulk(b"id");
    w.int(client_id as i64);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"modules");
    w.array_len(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(args: &[&str]) -> Result<Hello<'static>, ConnectionError> {
        let argv: Vec<&'static [u8]> = args.iter().map(|a| a.to_string().leak().as_bytes()).collect();
        Hello::parse(&argv)
    }

    #[test]
    fn hello_parses_every_option_before_acting() {
        assert_eq!(hello(&["hello"]).unwrap(), Hello { protocol: None, auth: None, name: None });
        let h = hello(&["hello", "3", "auth", "u", "p", "SETNAME", "app"]).unwrap();
        assert_eq!(h.protocol, Some(3));
        assert_eq!(h.auth, Some(Auth { user: Some(b"u"), password: b"p" }));
        assert_eq!(h.name.as_deref(), Some("app"));
        assert_eq!(hello(&["hello", "x"]), Err(ConnectionError::ProtocolNotInteger));
        assert_eq!(hello(&["hello", "4"]), Err(ConnectionError::UnsupportedProtocol));
        // A bad option after AUTH refuses the command before anyone is authenticated.
        let e = hello(&["hello", "2", "AUTH", "u", "p", "bogus"]).unwrap_err();
        assert_eq!(e.to_string(), "ERR Syntax error in HELLO option 'bogus'");
        assert_eq!(hello(&["hello", "2", "AUTH", "u"]).unwrap_err().to_string(), "ERR Syntax error in HELLO option 'AUTH'");
        assert_eq!(hello(&["hello", "2", "SETNAME", "a b"]), Err(ConnectionError::ClientName));
    }

    #[test]
    fn auth_and_client_names() {
        assert_eq!(Auth::parse(&[b"auth", b"pw"]), Ok(Auth { user: None, password: b"pw" }));
        assert_eq!(Auth::parse(&[b"auth", b"u", b"pw"]), Ok(Auth { user: Some(b"u"), password: b"pw" }));
        assert_eq!(Auth::parse(&[b"auth", b"a", b"b", b"c"]), Err(ConnectionError::Syntax));
        assert_eq!(client_name(b"").unwrap(), "");
        assert_eq!(client_name(b"worker-1").unwrap(), "worker-1");
        assert!(client_name(b"a\nb").is_err() && client_name(b"a b").is_err() && client_name(&[0x80]).is_err());
    }
}
