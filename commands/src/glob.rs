//! Glob-style pattern matching, as Redis's `stringmatchlen`: one matcher for every pattern
//! user (KEYS and the SCAN family's MATCH, PSUBSCRIBE, ACL key and channel patterns, CLIENT
//! KILL and CONFIG GET patterns, the proxy's fan-out).

/// Glob-style pattern matching as Redis's `stringmatchlen` (`* ? [abc] [^a] [a-z] \x`).
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    fn eq(a: u8, b: u8, nocase: bool) -> bool {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    }
    fn m(p: &[u8], s: &[u8], nocase: bool, depth: usize) -> bool {
        if depth > 1000 {
            return false;
        }
        let (mut pi, mut si) = (0, 0);
        while pi < p.len() {
            match p[pi] {
                b'*' => {
                    while pi + 1 < p.len() && p[pi + 1] == b'*' {
                        pi += 1;
                    }
                    if pi + 1 == p.len() {
                        return true;
                    }
                    for k in si..=s.len() {
                        if m(&p[pi + 1..], &s[k..], nocase, depth + 1) {
                            return true;
                        }
                    }
                    return false;
                }
                b'?' => {
                    if si >= s.len() {
                        return false;
                    }
                    si += 1;
                }
                b'[' => {
                    if si >= s.len() {
                        return false;
                    }
                    pi += 1;
                    let not = pi < p.len() && p[pi] == b'^';
                    if not {
                        pi += 1;
                    }
                    let mut matched = false;
                    loop {
                        if pi >= p.len() {
                            pi -= 1;
                            break;
                        }
                        if p[pi] == b'\\' && pi + 1 < p.len() {
                            pi += 1;
                            if p[pi] == s[si] {
                                matched = true;
                            }
                        } else if p[pi] == b']' {
                            break;
                        } else if pi + 2 < p.len() && p[pi + 1] == b'-' {
                            let (mut a, mut b) = (p[pi], p[pi + 2]);
                            if a > b {
                                std::mem::swap(&mut a, &mut b);
                            }
                            let c = s[si];
                            let (c, a, b) = if nocase { (c.to_ascii_lowercase(), a.to_ascii_lowercase(), b.to_ascii_lowercase()) } else { (c, a, b) };
                            if c >= a && c <= b {
                                matched = true;
                            }
                            pi += 2;
                        } else if eq(p[pi], s[si], nocase) {
                            matched = true;
                        }
                        pi += 1;
                    }
                    if not {
                        matched = !matched;
                    }
                    if !matched {
                        return false;
                    }
                    si += 1;
                }
                b'\\' if pi + 1 < p.len() => {
                    pi += 1;
                    if si >= s.len() || !eq(p[pi], s[si], nocase) {
                        return false;
                    }
                    si += 1;
                }
                c => {
                    if si >= s.len() || !eq(c, s[si], nocase) {
                        return false;
                    }
                    si += 1;
                }
            }
            pi += 1;
        }
        si == s.len()
    }
    m(pattern, s, nocase, 0)
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
        assert!(glob_match(b"user:*:name", b"user:42:name", false));
        assert!(!glob_match(b"user:*:name", b"user:42:age", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(glob_match(b"HELLO", b"hello", true));
    }
}
