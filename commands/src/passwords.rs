//! Passwords kept as argon2id PHC strings: the console's users and tenants (whose hashes the
//! proxies get, and check AUTH against). Slow on purpose: run `hash` and `verify` off a
//! reactor or an async worker. And the one comparison of secrets, in constant time.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// An argon2id PHC string of `password`, with a fresh random salt.
pub fn hash(password: &[u8]) -> String {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).expect("the system's random source");
    let salt = SaltString::encode_b64(&salt).expect("16 bytes make a salt");
    Argon2::default().hash_password(password, &salt).expect("argon2 with default parameters").to_string()
}

/// Whether `password` is the one `phc` was made of.
pub fn verify(password: &[u8], phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| Argon2::default().verify_password(password, &h).is_ok())
}

/// `bytes` as lowercase hex (digests, tokens and passwords made of random bytes).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// `n` random bytes from the system's source, as hex.
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("the system's random source");
    hex(&buf)
}

/// Whether two secrets (passwords, digests, tokens) are equal, compared without stopping at
/// the first difference: the time taken does not tell how much of a guess was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `text` is an argon2 PHC string (`$argon2id$…`) with a salt and a hash.
pub fn is_phc(text: &str) -> bool {
    text.starts_with("$argon2") && PasswordHash::new(text).is_ok_and(|h| h.salt.is_some() && h.hash.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only_and_is_salted() {
        let h = hash(b"correct horse");
        assert!(h.starts_with("$argon2id$") && is_phc(&h), "{h}");
        assert!(verify(b"correct horse", &h));
        assert!(!verify(b"correct horsE", &h));
        assert_ne!(hash(b"correct horse"), h, "each hash has its own salt");
        assert!(!is_phc("5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"));
        assert!(!verify(b"x", "not a hash"));
        assert!(!is_phc("$argon2id$nonsense"));
        assert_eq!(hex(&[0x00, 0x9f, 0xa0, 0xff]), "009fa0ff");
        assert_eq!(random_hex(16).len(), 32);
        assert!(constant_time_eq(b"abc", b"abc") && !constant_time_eq(b"abc", b"abd") && !constant_time_eq(b"abc", b"ab"));
    }
}
