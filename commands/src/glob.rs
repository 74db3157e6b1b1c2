//! Glob-style pattern matching with Redis's semantics (`stringmatchlen`): one matcher for every
//! pattern user (KEYS and the SCAN family's MATCH, PSUBSCRIBE and PUBSUB CHANNELS, ACL key
//! and channel patterns, CLIENT KILL, CONFIG GET and FUNCTION LIST patterns).
//!
//! Redis matches recursively, one level per `*`, which is exponential in the number of stars
//! (CVE-2022-36021); 7.0.15 bounds it by giving up (no match) past 1,000 nested stars and
//! by not retrying longer matches for an earlier star once a later one failed. This matcher
//! gives the same answers in O(pattern × string) time with no recursion: every token but `*`
//! consumes exactly one byte, so when the pattern fails after a star it is enough to let the
//! last star absorb one more byte and go on from there (the classic wildcard algorithm). Two
//! rules keep Redis's answers where they follow from its recursion rather than from globbing:
//! a non-empty pattern never matches the empty string, and a pattern with more than
//! `MAX_NESTED_STARS` stars followed by something else never matches.

/// How many stars Redis follows into (each one a recursion level) before it gives up.
pub const MAX_NESTED_STARS: usize = 1000;

/// Whether `s` matches `pattern` (`* ? [abc] [^a] [a-z] \x`), ASCII-case-insensitively when
/// `nocase`.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    if s.is_empty() {
        return pattern.is_empty();
    }
    if nested_stars(pattern) > MAX_NESTED_STARS {
        return false;
    }
    let p = pattern;
    let (mut pi, mut si) = (0, 0);
    // The last star met: where the pattern goes on after it, and where its match ends now.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if si == s.len() {
            // Only stars may be left (they match the empty rest).
            return p[pi..].iter().all(|&c| c == b'*');
        }
        if pi < p.len() {
            if p[pi] == b'*' {
                while pi < p.len() && p[pi] == b'*' {
                    pi += 1;
                }
                if pi == p.len() {
                    return true;
                }
                star = Some((pi, si));
                continue;
            }
            let (matched, next) = token(p, pi, s[si], nocase);
            if matched {
                pi = next;
                si += 1;
                continue;
            }
        }
        // A mismatch, or pattern left over: the last star takes one more byte.
        match star {
            // The rest after a star needs at least one byte (it is not all stars).
            Some((after, end)) if end + 1 < s.len() => {
                star = Some((after, end + 1));
                pi = after;
                si = end + 1;
            }
            _ => return false,
        }
    }
}

/// The runs of stars a match has to go through one by one: every run but a last one that ends
/// the pattern (Redis returns a match there without going deeper).
fn nested_stars(p: &[u8]) -> usize {
    let (mut pi, mut runs) = (0, 0);
    while pi < p.len() {
        if p[pi] == b'*' {
            while pi < p.len() && p[pi] == b'*' {
                pi += 1;
            }
            runs += (pi < p.len()) as usize;
        } else {
            pi = token(p, pi, 0, false).1;
        }
    }
    runs
}

/// Matches the one-byte token at `p[pi]` (not a star) against `c`: whether it matches, and
/// where the next token starts. Where a token ends depends only on the pattern.
fn token(p: &[u8], mut pi: usize, c: u8, nocase: bool) -> (bool, usize) {
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    match p[pi] {
        b'?' => (true, pi + 1),
        b'[' => {
            pi += 1;
            let not = pi < p.len() && p[pi] == b'^';
            if not {
                pi += 1;
            }
            let mut matched = false;
            loop {
                if pi >= p.len() {
                    // No closing bracket: the class ends with the pattern.
                    pi -= 1;
                    break;
                }
                if p[pi] == b'\\' && pi + 1 < p.len() {
                    pi += 1;
                    // Redis compares an escaped class member exactly, even with nocase.
                    matched |= p[pi] == c;
                } else if p[pi] == b']' {
                    break;
                } else if pi + 2 < p.len() && p[pi + 1] == b'-' {
                    let (mut lo, mut hi) = (p[pi], p[pi + 2]);
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let (lo, hi, c) = if nocase { (lo.to_ascii_lowercase(), hi.to_ascii_lowercase(), c.to_ascii_lowercase()) } else { (lo, hi, c) };
                    matched |= (lo..=hi).contains(&c);
                    pi += 2;
                } else {
                    matched |= eq(p[pi], c);
                }
                pi += 1;
            }
            (matched != not, pi + 1)
        }
        // A backslash escapes the next byte; a last one is itself.
        b'\\' if pi + 1 < p.len() => (eq(p[pi + 1], c), pi + 2),
        literal => (eq(literal, c), pi + 1),
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Redis's recursive matcher, as 7.0.15 has it (exponential: small inputs only), for the
/// tests and the glob fuzz target to compare answers with. Redis's rule for the empty
/// string is the caller's: see `glob_match`.
pub fn reference(p: &[u8], s: &[u8], nocase: bool, nesting: usize) -> bool {
    if nesting > MAX_NESTED_STARS {
        return false;
    }
    let (mut pi, mut si) = (0, 0);
    while pi < p.len() && si < s.len() {
        if p[pi] == b'*' {
            while pi + 1 < p.len() && p[pi + 1] == b'*' {
                pi += 1;
            }
            if pi + 1 == p.len() {
                return true;
            }
            return (si..s.len()).any(|k| reference(&p[pi + 1..], &s[k..], nocase, nesting + 1));
        }
        let (matched, next) = token(p, pi, s[si], nocase);
        if !matched {
            return false;
        }
        pi = next;
        si += 1;
        if si == s.len() {
            while pi < p.len() && p[pi] == b'*' {
                pi += 1;
            }
            break;
        }
    }
    pi == p.len() && si == s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"h[b-a]llo", b"hbllo", false), "a reversed range");
        assert!(glob_match(b"user:*:name", b"user:42:name", false));
        assert!(!glob_match(b"user:*:name", b"user:42:age", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(!glob_match(b"a\\*b", b"axb", false));
        assert!(glob_match(b"a\\", b"a\\", false), "a last backslash is itself");
        assert!(glob_match(b"HELLO", b"hello", true));
        assert!(glob_match(b"[A-C]x", b"bx", true));
        assert!(glob_match(b"a[bc", b"ac", false), "an unclosed class ends with the pattern");
        assert!(glob_match(b"a*", b"a", false));
        assert!(glob_match(b"a*b*", b"ab", false));
        assert!(!glob_match(b"a*b", b"a", false));
        assert!(!glob_match(b"*", b"", false), "as Redis: a pattern never matches the empty string");
        assert!(glob_match(b"", b"", false));
    }

    #[test]
    fn nested_stars_cannot_blow_up() {
        // The suite's "Regression for pattern matching long nested loops".
        let key = vec![b'a'; 100];
        let pattern = [&b"a*".repeat(47)[..], b"b"].concat();
        assert!(!glob_match(&pattern, &key, false));
        assert!(glob_match(&[&b"a*".repeat(47)[..], b"a"].concat(), &key, false));
        // "very long nested loops": 50,000 stars, which Redis gives up on (no match).
        let key = vec![b'a'; 50_000];
        assert!(!glob_match(&b"*?".repeat(50_000), &key, false));
        // Up to 1,000 nested stars still match.
        assert!(glob_match(&b"*?".repeat(1000), &key[..1000], false));
        assert!(!glob_match(&b"*?".repeat(1001), &key[..1001], false));
        assert!(glob_match(&[&b"*?".repeat(1000)[..], b"*"].concat(), &key[..1000], false), "a last star does not nest");
    }

    #[test]
    fn same_answers_as_redis_recursive_matcher() {
        let mut rng = fastrand::Rng::with_seed(7);
        let alphabet = b"ab*?[]^-\\A";
        for _ in 0..200_000 {
            let p: Vec<u8> = (0..rng.usize(0..9)).map(|_| alphabet[rng.usize(..alphabet.len())]).collect();
            let s: Vec<u8> = (0..rng.usize(0..7)).map(|_| b"abA-]*"[rng.usize(..6)]).collect();
            let nocase = rng.bool();
            let want = if s.is_empty() { p.is_empty() } else { reference(&p, &s, nocase, 0) };
            assert_eq!(glob_match(&p, &s, nocase), want, "pattern {:?} string {:?} nocase {nocase}", String::from_utf8_lossy(&p), String::from_utf8_lossy(&s));
        }
    }
}
