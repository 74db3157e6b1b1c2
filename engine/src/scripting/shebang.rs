//! What a script declares about itself, as Redis 7: an EVAL body may start with a shebang
//! line, `#!lua` with an optional `flags=no-writes,allow-oom,…`; a library function declares
//! the same flags when it registers. A script with declared flags is admitted by them (a
//! `no-writes` script is read-only, is not held by CLIENT PAUSE WRITE and may run out of
//! memory; one without `allow-oom` is refused when the server is out of memory); one
//! without a shebang runs in compatibility mode, by the EVAL command's own flags.

/// The flags a script or library function declared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot_keys: bool,
}

impl Declared {
    /// Sets one flag by its name; false if there is no such flag.
    fn set(&mut self, name: &[u8]) -> bool {
        let flag = match name {
            b"no-writes" => &mut self.no_writes,
            b"allow-oom" => &mut self.allow_oom,
            b"allow-stale" => &mut self.allow_stale,
            b"no-cluster" => &mut self.no_cluster,
            b"allow-cross-slot-keys" => &mut self.allow_cross_slot_keys,
            _ => return false,
        };
        *flag = true;
        true
    }

    /// A library function's flags (checked when it registered).
    pub fn of_function<S: AsRef<str>>(flags: &[S]) -> Declared {
        let mut d = Declared::default();
        for f in flags {
            d.set(f.as_ref().as_bytes());
        }
        d
    }
}

/// A body's shebang: None without one (compatibility mode), else the flags it declares and
/// the length of the shebang line (the code starts at its line break, so line numbers
/// stay those of the body). Errors have Redis's texts, without the `ERR ` code.
pub fn parse(body: &[u8]) -> Result<Option<(Declared, usize)>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = &body[..end];
    let mut parts = line.split(|c| c.is_ascii_whitespace()).filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or(b"#!");
    if engine != b"#!lua" {
        return Err(format!("Unexpected engine in script shebang: {}", String::from_utf8_lossy(engine)));
    }
    let mut declared = Declared::default();
    for part in parts {
        let Some(flags) = part.strip_prefix(b"flags=") else {
            return Err(format!("Unknown lua shebang option: {}", String::from_utf8_lossy(part)));
        };
        for flag in flags.split(|&c| c == b',').filter(|f| !f.is_empty()) {
            if !declared.set(flag) {
                return Err(format!("Unexpected flag in script shebang: {}", String::from_utf8_lossy(flag)));
            }
        }
    }
    Ok(Some((declared, end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_as_redis_reads_them() {
        assert_eq!(parse(b"return 1").unwrap(), None);
        assert_eq!(parse(b"#!lua\nreturn 1").unwrap(), Some((Declared::default(), 5)));
        let (d, len) = parse(b"#!lua flags=no-writes,allow-stale\nreturn 1").unwrap().unwrap();
        assert!(d.no_writes && d.allow_stale && !d.allow_oom);
        assert_eq!(len, 33);
        assert_eq!(parse(b"#!lua flags=\nreturn 1").unwrap(), Some((Declared::default(), 12)));
        assert_eq!(parse(b"#!not-lua\nreturn 1").unwrap_err(), "Unexpected engine in script shebang: #!not-lua");
        assert_eq!(parse(b"#!lua badger=data\n").unwrap_err(), "Unknown lua shebang option: badger=data");
        assert_eq!(parse(b"#!lua flags=allow-oom,what?\n").unwrap_err(), "Unexpected flag in script shebang: what?");
        assert_eq!(parse(b"#!lua").unwrap_err(), "Invalid script shebang");
        assert_eq!(Declared::of_function(&["no-writes"]), Declared { no_writes: true, ..Declared::default() });
    }
}
