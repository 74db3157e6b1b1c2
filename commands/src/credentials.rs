//! How the console and the proxies authenticate to engines, and how an engine proves it is
//! one of the appliance's before the console tells it anything secret.
//!
//! With one password shared by every engine, whoever gets an address registered as an
//! engine is sent that password, and with it reads every tenant on every engine. So each
//! engine has its own password instead, derived from the appliance's engine key and the
//! address the control plane knows it by (`engine_password`): an impostor at an address
//! learns that address's password alone, which no real engine accepts.
//!
//! The console also sends engines other engines' passwords (the primary a replica follows,
//! the target of a slot move). Before it does, the engine proves it holds the password of
//! the address the console dialled (`TERRACE.PROVE nonce` answers `proof`): an impostor that
//! relays the nonce to a real engine gets back a proof for the real engine's address, which
//! does not match.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;

use crate::passwords::{hex, random_hex};
use crate::settings::{read_secret_file_if_set, ConfigError};

/// What TERRACE.PROVE's nonce must be: long enough that an answer can't be replayed, short
/// enough to bound what an unauthenticated client makes the engine hash.
pub const NONCE_LENGTHS: std::ops::RangeInclusive<usize> = 16..=128;

fn mac_hex(key: &[u8], domain: &[u8], message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(domain);
    mac.update(&[0]);
    mac.update(message);
    hex(&mac.finalize().into_bytes())
}

/// The password of the engine at `address` (host:port, as the control plane lists it) under
/// the appliance's engine key.
pub fn engine_password(key: &str, address: &str) -> String {
    mac_hex(key.as_bytes(), b"terrace engine password", address.as_bytes())
}

/// What an engine whose password is `password` answers to `TERRACE.PROVE nonce`.
pub fn proof(password: &str, nonce: &[u8]) -> String {
    mac_hex(password.as_bytes(), b"terrace engine proof", nonce)
}

/// A fresh nonce for TERRACE.PROVE (32 random bytes in hex).
pub fn nonce() -> String {
    random_hex(32)
}

/// How a process authenticates to the engines it connects to.
#[derive(Clone, Default)]
pub enum EngineAuth {
    /// The engines ask for no password.
    #[default]
    None,
    /// One password for every engine (`engine_password_file`): only safe where the links
    /// are mutual TLS, since any address registered as an engine is sent it.
    Shared(Arc<str>),
    /// Each engine's own password, derived from this key (`engine_key_file`); the engine
    /// proves it before the console sends it anything secret.
    PerEngine(Arc<str>),
}

impl std::fmt::Debug for EngineAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineAuth::None => "EngineAuth::None",
            EngineAuth::Shared(_) => "EngineAuth::Shared(..)",
            EngineAuth::PerEngine(_) => "EngineAuth::PerEngine(..)",
        })
    }
}

impl EngineAuth {
    /// From a process's two settings, which exclude each other.
    pub fn from_files(password_file: Option<&std::path::Path>, key_file: Option<&std::path::Path>) -> Result<EngineAuth, ConfigError> {
        if password_file.is_some() && key_file.is_some() {
            return Err(ConfigError::Invalid {
                key: "engine_key_file".into(),
                reason: "set engine_key_file (each engine's own password) or engine_password_file (one for all), not both".into(),
            });
        }
        if let Some(key) = read_secret_file_if_set("engine_key_file", key_file)? {
            return Ok(EngineAuth::PerEngine(key.into()));
        }
        Ok(read_secret_file_if_set("engine_password_file", password_file)?.map_or(EngineAuth::None, |p| EngineAuth::Shared(p.into())))
    }

    /// The password to give the engine at `address`.
    pub fn password_for(&self, address: &str) -> Option<Arc<str>> {
        match self {
            EngineAuth::None => None,
            EngineAuth::Shared(p) => Some(p.clone()),
            EngineAuth::PerEngine(key) => Some(engine_password(key, address).into()),
        }
    }

    /// Whether an engine must prove itself before it is authenticated to: its proof means
    /// something only when its password is its own.
    pub fn proves(&self) -> bool {
        matches!(self, EngineAuth::PerEngine(_))
    }

    /// Whether `answer` is the proof for `nonce` of the engine at `address`.
    pub fn proof_holds(&self, address: &str, nonce: &[u8], answer: &[u8]) -> bool {
        self.password_for(address).is_some_and(|p| crate::passwords::constant_time_eq(proof(&p, nonce).as_bytes(), answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_password_and_proof() {
        let auth = EngineAuth::PerEngine("key".into());
        let a = auth.password_for("127.0.0.1:7001").unwrap();
        let b = auth.password_for("127.0.0.1:7002").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert_ne!(&*a, engine_password("other key", "127.0.0.1:7001"), "the key matters");
        let n = nonce();
        assert!(NONCE_LENGTHS.contains(&n.len()));
        // The engine at 7001 proves 7001; its proof does not pass for 7002 (a relay).
        let answer = proof(&a, n.as_bytes());
        assert!(auth.proof_holds("127.0.0.1:7001", n.as_bytes(), answer.as_bytes()));
        assert!(!auth.proof_holds("127.0.0.1:7002", n.as_bytes(), answer.as_bytes()));
        assert!(!auth.proof_holds("127.0.0.1:7001", b"another nonce....", answer.as_bytes()));
        // A proof is not the password.
        assert_ne!(answer, *a);
        assert!(auth.proves() && !EngineAuth::Shared("p".into()).proves());
        assert_eq!(EngineAuth::Shared("p".into()).password_for("x:1").as_deref(), Some("p"));
        assert!(EngineAuth::None.password_for("x:1").is_none());
    }

    #[test]
    fn the_two_settings_exclude_each_other() {
        let e = EngineAuth::from_files(Some("/a".as_ref()), Some("/b".as_ref())).unwrap_err();
        assert!(e.to_string().contains("engine_key_file"), "{e}");
        assert!(matches!(EngineAuth::from_files(None, None), Ok(EngineAuth::None)));
    }
}
