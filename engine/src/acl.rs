//! Access control lists, as Redis 7: users with passwords (kept as SHA-256 hashes), allowed
//! commands and categories, key patterns with read/write permissions, pub/sub channel
//! patterns, and extra selectors — plus the log of denied requests.
//!
//! Commands rules are kept as the operator wrote them, each command or category mentioned
//! once (the last mention wins), which is how Redis 7.2+ describes them. A connection keeps
//! its user as an `Arc<User>` and refreshes it when the ACL generation moves, so the check on
//! the request path is one atomic load and, for unrestricted users, one flag.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use terrace_commands::table::{key_positions, CommandSpec, COMMANDS, INDEX};
use terrace_commands::SUBCOMMANDS;

/// Command categories, in the order Redis lists them.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Commands Redis marks @dangerous beyond the admin ones.
const DANGEROUS: &[&str] = &["keys", "flushall", "flushdb", "swapdb", "sort", "sort_ro", "restore", "info", "role", "lastsave"];

/// The categories of a command, derived from its group and flags.
pub fn categories_of(spec: &CommandSpec) -> Vec<&'static str> {
    let mut v = Vec::new();
    let group = match spec.group {
        "string" => Some("string"),
        "bitmap" => Some("bitmap"),
        "hyperloglog" => Some("hyperloglog"),
        "list" => Some("list"),
        "hash" => Some("hash"),
        "set" => Some("set"),
        "sortedset" => Some("sortedset"),
        "geo" => Some("geo"),
        "stream" => Some("stream"),
        "keyspace" | "generic" => Some("keyspace"),
        "transaction" => Some("transaction"),
        "connection" => Some("connection"),
        "pubsub" => Some("pubsub"),
        "scripting" => Some("scripting"),
        _ => None,
    };
    v.extend(group);
    use terrace_commands::table::Flags;
    let has = |f: Flags| spec.flags.has(f);
    if has(Flags::WRITE) {
        v.push("write");
    }
    if has(Flags::READONLY) {
        v.push("read");
    }
    if has(Flags::ADMIN) {
        v.push("admin");
        v.push("dangerous");
    } else if DANGEROUS.contains(&spec.name) {
        v.push("dangerous");
    }
    v.push(if has(Flags::FAST) { "fast" } else { "slow" });
    if has(Flags::BLOCKING) {
        v.push("blocking");
    }
    v
}

/// Hex SHA-256 of a password, as ACL LIST shows it.
pub fn hash_password(p: &[u8]) -> String {
    Sha256::digest(p).iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// The command (or `cmd|sub`) is not allowed.
    Command(String),
    /// A key argument is outside the allowed patterns.
    Key(Vec<u8>),
    /// A pub/sub channel (or pattern) is outside the allowed channels.
    Channel(Vec<u8>),
}

impl Denied {
    /// The error a client gets.
    pub fn error(&self) -> String {
        match self {
            Denied::Command(c) => format!("NOPERM this user has no permissions to run the '{c}' command"),
            Denied::Key(_) => "NOPERM this user has no permissions to access one of the keys used as arguments".into(),
            Denied::Channel(_) => "NOPERM this user has no permissions to access one of the channels used as arguments".into(),
        }
    }
    /// The text ACL DRYRUN answers.
    pub fn dryrun_text(&self) -> String {
        match self {
            Denied::Command(c) => format!("This user has no permissions to run the '{c}' command"),
            Denied::Key(k) => format!("This user has no permissions to access the '{}' key", String::from_utf8_lossy(k)),
            Denied::Channel(c) => format!("This user has no permissions to access the '{}' channel", String::from_utf8_lossy(c)),
        }
    }
    fn reason(&self) -> &'static str {
        match self {
            Denied::Command(_) => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }
    fn object(&self) -> String {
        match self {
            Denied::Command(c) => c.clone(),
            Denied::Key(k) | Denied::Channel(k) => String::from_utf8_lossy(k).into_owned(),
        }
    }
}

const READ: u8 = 1;
const WRITE: u8 = 2;

#[derive(Clone, Debug)]
struct KeyPattern {
    perm: u8,
    pattern: Vec<u8>,
}

/// One set of permissions: the root one of a user, or a `(...)` selector.
#[derive(Clone, Debug)]
pub struct Selector {
    allowed: Vec<bool>,
    /// Started from `+@all` (future commands allowed).
    all_base: bool,
    /// `(rule, allow)` as written, latest mention last.
    rules: Vec<(String, bool)>,
    allowed_subs: HashSet<(usize, Vec<u8>)>,
    denied_subs: HashSet<(usize, Vec<u8>)>,
    all_keys: bool,
    keys: Vec<KeyPattern>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new() -> Self {
        Selector {
            allowed: vec![false; COMMANDS.len()],
            all_base: false,
            rules: Vec::new(),
            allowed_subs: HashSet::new(),
            denied_subs: HashSet::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    fn set_all(&mut self, allow: bool) {
        self.allowed.iter_mut().for_each(|b| *b = allow);
        self.all_base = allow;
        self.rules.clear();
        self.allowed_subs.clear();
        self.denied_subs.clear();
    }

    fn note_rule(&mut self, name: String, allow: bool) {
        self.rules.retain(|(n, _)| *n != name);
        self.rules.push((name, allow));
    }

    /// Applies one selector rule (commands, keys, channels).
    fn apply(&mut self, op: &str) -> Result<(), String> {
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "allcommands" | "+@all" => self.set_all(true),
            "nocommands" | "-@all" => self.set_all(false),
            "allkeys" => {
                self.all_keys = true;
                self.keys.clear();
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            "allchannels" => {
                self.all_channels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            _ => return self.apply_pattern_or_command(op),
        }
        Ok(())
    }

    fn apply_pattern_or_command(&mut self, op: &str) -> Result<(), String> {
        let b = op.as_bytes();
        if b.first() == Some(&b'~') || b.first() == Some(&b'%') {
            let (perm, pat) = if b[0] == b'~' {
                (READ | WRITE, &b[1..])
            } else {
                let tilde = b.iter().position(|&c| c == b'~').ok_or("Syntax error")?;
                let mut perm = 0;
                for &c in &b[1..tilde] {
                    perm |= match c.to_ascii_uppercase() {
                        b'R' => READ,
                        b'W' => WRITE,
                        _ => return Err("Syntax error".into()),
                    };
                }
                if perm == 0 {
                    return Err("Syntax error".into());
                }
                (perm, &b[tilde + 1..])
            };
            if self.all_keys {
                return Err("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns".into());
            }
            if pat == b"*" && perm == READ | WRITE {
                self.all_keys = true;
                self.keys.clear();
            } else if let Some(k) = self.keys.iter_mut().find(|k| k.pattern == pat) {
                k.perm |= perm;
            } else {
                self.keys.push(KeyPattern { perm, pattern: pat.to_vec() });
            }
            return Ok(());
        }
        if let Some(pat) = b.strip_prefix(b"&") {
            if self.all_channels {
                return Err("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels".into());
            }
            if pat == b"*" {
                self.all_channels = true;
                self.channels.clear();
            } else if !self.channels.iter().any(|c| c == pat) {
                self.channels.push(pat.to_vec());
            }
            return Ok(());
        }
        let allow = match b.first() {
            Some(b'+') => true,
            Some(b'-') => false,
            _ => return Err("Syntax error".into()),
        };
        let name = op[1..].to_ascii_lowercase();
        let unknown = || "Unknown command or category name in ACL".to_string();
        if let Some(cat) = name.strip_prefix('@') {
            if !CATEGORIES.contains(&cat) {
                return Err(unknown());
            }
            for (i, spec) in COMMANDS.iter().enumerate() {
                if categories_of(spec).contains(&cat) {
                    self.allowed[i] = allow;
                    self.allowed_subs.retain(|(c, _)| *c != i);
                    self.denied_subs.retain(|(c, _)| *c != i);
                }
            }
            self.note_rule(name, allow);
            return Ok(());
        }
        match name.split_once('|') {
            None => {
                let &i = INDEX.get(name.as_str()).ok_or_else(unknown)?;
                self.allowed[i] = allow;
                self.allowed_subs.retain(|(c, _)| *c != i);
                self.denied_subs.retain(|(c, _)| *c != i);
                self.note_rule(name, allow);
            }
            Some((cmd, sub)) => {
                let &i = INDEX.get(cmd).ok_or_else(unknown)?;
                if sub.is_empty() || sub.contains('|') {
                    return Err(unknown());
                }
                if let Some((_, subs)) = SUBCOMMANDS.iter().find(|(c, _)| *c == cmd) {
                    if !subs.iter().any(|(s, _)| *s == sub) {
                        return Err(unknown());
                    }
                } else if !allow {
                    return Err("Allowing first-arg of a subcommand is not supported".into());
                }
                let k = (i, sub.as_bytes().to_vec());
                if allow {
                    self.denied_subs.remove(&k);
                    self.allowed_subs.insert(k);
                } else {
                    self.allowed_subs.remove(&k);
                    self.denied_subs.insert(k);
                }
                self.note_rule(name, allow);
            }
        }
        Ok(())
    }

    fn command_allowed(&self, idx: usize, argv: &[&[u8]]) -> bool {
        let sub = argv.get(1).map(|s| s.to_ascii_lowercase());
        let sub_hit = |set: &HashSet<(usize, Vec<u8>)>| sub.as_ref().is_some_and(|s| set.contains(&(idx, s.clone())));
        if self.allowed[idx] {
            !sub_hit(&self.denied_subs)
        } else {
            sub_hit(&self.allowed_subs)
        }
    }

    fn key_allowed(&self, key: &[u8], need: u8) -> bool {
        self.all_keys || self.keys.iter().any(|k| k.perm & need == need && terrace_commands::glob::glob_match(&k.pattern, key, false))
    }

    /// Checks a request against this selector.
    fn check(&self, idx: usize, argv: &[&[u8]]) -> Result<(), Denied> {
        let spec = &COMMANDS[idx];
        // Commands that run before authentication (AUTH, HELLO, QUIT…) are always allowed.
        if !spec.no_auth && !self.command_allowed(idx, argv) {
            return Err(Denied::Command(terrace_commands::table::full_name(spec, argv)));
        }
        if !self.all_channels {
            if let Some((channels, literal)) = terrace_commands::keys::channel_args(spec.id, argv) {
                for c in channels {
                    let ok = if literal {
                        self.channels.iter().any(|p| p == c)
                    } else {
                        self.channels.iter().any(|p| terrace_commands::glob::glob_match(p, c, false))
                    };
                    if !ok {
                        return Err(Denied::Channel(c.to_vec()));
                    }
                }
            }
        }
        if self.all_keys {
            return Ok(());
        }
        for (n, i) in key_positions(spec, argv).into_iter().enumerate() {
            let flags = terrace_commands::keyspecs::key_flags_for(spec.name, n, argv);
            let mut need = 0;
            if flags.contains(&"access") {
                need |= READ;
            }
            if flags.iter().any(|f| matches!(*f, "insert" | "update" | "delete")) {
                need |= WRITE;
            }
            if !self.key_allowed(argv[i], need) {
                return Err(Denied::Key(argv[i].to_vec()));
            }
        }
        Ok(())
    }

    fn unrestricted(&self) -> bool {
        self.all_base && self.allowed.iter().all(|b| *b) && self.denied_subs.is_empty() && self.all_keys && self.all_channels
    }

    fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let parts: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                let p = String::from_utf8_lossy(&k.pattern);
                match k.perm {
                    READ => format!("%R~{p}"),
                    WRITE => format!("%W~{p}"),
                    _ => format!("~{p}"),
                }
            })
            .collect();
        parts.join(" ")
    }

    fn describe_channels(&self, with_reset: bool) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let mut parts: Vec<String> = Vec::new();
        if with_reset {
            parts.push("resetchannels".into());
        }
        parts.extend(self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))));
        parts.join(" ")
    }

    fn describe_commands(&self) -> String {
        let mut s = String::from(if self.all_base { "+@all" } else { "-@all" });
        for (name, allow) in &self.rules {
            s.push(' ');
            s.push(if *allow { '+' } else { '-' });
            s.push_str(name);
        }
        s
    }

    /// The selector as ACL LIST shows it (keys, channels, commands).
    fn describe(&self) -> String {
        [self.describe_keys(), self.describe_channels(true), self.describe_commands()].into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ")
    }
}

/// A user.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// None: not set; Some(true): skip-sanitize-payload; Some(false): sanitize-payload.
    skip_sanitize: Option<bool>,
    passwords: Vec<String>,
    root: Selector,
    selectors: Vec<Selector>,
    /// May run anything on any key (the check is skipped).
    pub unrestricted: bool,
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no passwords, no permissions.
    pub(crate) fn new(name: &str) -> Self {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            skip_sanitize: None,
            passwords: Vec::new(),
            root: Selector::new(),
            selectors: Vec::new(),
            unrestricted: false,
        }
    }

    /// The default user: on, nopass, everything allowed.
    pub(crate) fn default_user() -> Self {
        let mut u = User::new("default");
        for op in ["on", "nopass", "allkeys", "allchannels", "allcommands"] {
            u.apply(op).expect("valid default rules");
        }
        u
    }

    /// Applies one rule of ACL SETUSER.
    pub fn apply(&mut self, op: &str) -> Result<(), String> {
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "skip-sanitize-payload" => self.skip_sanitize = Some(true),
            "sanitize-payload" => self.skip_sanitize = Some(false),
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels", "off", "sanitize-payload", "clearselectors", "-@all"] {
                    self.apply(r)?;
                }
            }
            _ => {
                let b = op.as_bytes();
                match b.first() {
                    Some(b'>') => {
                        let h = hash_password(&b[1..]);
                        if !self.passwords.contains(&h) {
                            self.passwords.push(h);
                        }
                        self.nopass = false;
                    }
                    Some(b'#') => {
                        let h = &op[1..];
                        if h.len() != 64 || !h.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
                            return Err("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters".into());
                        }
                        if !self.passwords.iter().any(|p| p == h) {
                            self.passwords.push(h.to_string());
                        }
                        self.nopass = false;
                    }
                    Some(b'<') | Some(b'!') => {
                        let h = if b[0] == b'<' { hash_password(&b[1..]) } else { op[1..].to_string() };
                        if b[0] == b'!' && (h.len() != 64 || !h.bytes().all(|c| c.is_ascii_hexdigit())) {
                            return Err("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters".into());
                        }
                        let before = self.passwords.len();
                        self.passwords.retain(|p| *p != h);
                        if self.passwords.len() == before {
                            return Err("The password you are trying to remove from the user does not exist".into());
                        }
                    }
                    Some(b'(') if b.last() == Some(&b')') => {
                        let mut sel = Selector::new();
                        for part in op[1..op.len() - 1].split(' ').filter(|p| !p.is_empty()) {
                            sel.apply(part)?;
                        }
                        self.selectors.push(sel);
                    }
                    _ => self.root.apply(op)?,
                }
            }
        }
        self.unrestricted = self.root.unrestricted();
        Ok(())
    }

    /// Whether `password` opens this user.
    pub fn password_ok(&self, password: &[u8]) -> bool {
        self.nopass || self.passwords.contains(&hash_password(password))
    }

    /// Checks a request: allowed if the root permissions or any selector allow it.
    pub fn check(&self, idx: usize, argv: &[&[u8]]) -> Result<(), Denied> {
        if self.unrestricted {
            return Ok(());
        }
        let root = self.root.check(idx, argv);
        if root.is_ok() || self.selectors.iter().any(|s| s.check(idx, argv).is_ok()) {
            return Ok(());
        }
        root
    }

    fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.skip_sanitize {
            Some(true) => f.push("skip-sanitize-payload"),
            Some(false) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user as ACL LIST shows it.
    pub fn describe(&self) -> String {
        let mut s = format!("user {}", self.name);
        for f in self.flags() {
            s.push(' ');
            s.push_str(f);
        }
        for p in &self.passwords {
            s.push_str(" #");
            s.push_str(p);
        }
        s.push(' ');
        s.push_str(&self.root.describe());
        for sel in &self.selectors {
            s.push_str(" (");
            s.push_str(&sel.describe());
            s.push(')');
        }
        s
    }
}

/// What ACL GETUSER reports about one selector.
pub struct SelectorInfo {
    pub commands: String,
    pub keys: String,
    pub channels: String,
}

/// What ACL GETUSER reports.
pub struct UserInfo {
    pub flags: Vec<&'static str>,
    pub passwords: Vec<String>,
    pub root: SelectorInfo,
    pub selectors: Vec<SelectorInfo>,
}

fn selector_info(s: &Selector) -> SelectorInfo {
    SelectorInfo { commands: s.describe_commands(), keys: s.describe_keys(), channels: s.describe_channels(false) }
}

impl User {
    pub fn info(&self) -> UserInfo {
        UserInfo {
            flags: self.flags(),
            passwords: self.passwords.clone(),
            root: selector_info(&self.root),
            selectors: self.selectors.iter().map(selector_info).collect(),
        }
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: &'static str,
    pub context: &'static str,
    pub object: String,
    pub username: String,
    pub created: Instant,
    pub updated: Instant,
    pub client_info: String,
}

/// Entries kept (Redis's acllog-max-len default).
const LOG_MAX: usize = 128;
/// Identical denials within this window are counted in one entry.
const LOG_GROUP_SECS: u64 = 60;

/// The user table and the denial log.
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    /// Bumped on every change, so connections know to refresh their user.
    generation: AtomicU64,
    log: parking_lot::Mutex<VecDeque<LogEntry>>,
}

impl Default for Acl {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), Arc::new(User::default_user()));
        Acl { users: RwLock::new(users), generation: AtomicU64::new(1), log: parking_lot::Mutex::new(VecDeque::new()) }
    }
}

/// Joins ACL SETUSER arguments so that a `(` selector split over several arguments becomes
/// one rule, as Redis does.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut open: Option<String> = None;
    for a in args {
        let s = String::from_utf8_lossy(a).into_owned();
        match open.as_mut() {
            Some(acc) => {
                acc.push(' ');
                acc.push_str(&s);
                if s.ends_with(')') {
                    out.push(open.take().expect("open"));
                }
            }
            None if s.starts_with('(') && !s.ends_with(')') => open = Some(s),
            None => out.push(s),
        }
    }
    if let Some(start) = open {
        let first = start.split(' ').next().unwrap_or("").to_string();
        return Err(format!("ERR Unmatched parenthesis in acl selector starting at '{first}'."));
    }
    Ok(out)
}

impl Acl {
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub fn user(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.user("default").expect("the default user always exists")
    }

    /// Whether new connections must authenticate (the default user has a password or is off).
    pub fn auth_required(&self) -> bool {
        let d = self.default_user();
        !d.nopass || !d.enabled
    }

    /// Authenticates: the user if it exists, is on and the password matches.
    pub fn authenticate(&self, name: &str, password: &[u8]) -> Option<Arc<User>> {
        self.user(name).filter(|u| u.enabled && u.password_ok(password))
    }

    /// Creates or modifies a user; all rules apply or none do.
    pub fn set_user(&self, name: &str, rules: &[String]) -> Result<(), String> {
        let mut users = self.users.write();
        let mut u = users.get(name).map(|u| (**u).clone()).unwrap_or_else(|| {
            let mut u = User::new(name);
            u.apply("resetchannels").expect("valid");
            u
        });
        for r in rules {
            u.apply(r).map_err(|why| format!("ERR Error in ACL SETUSER modifier '{r}': {why}"))?;
        }
        users.insert(name.to_string(), Arc::new(u));
        drop(users);
        self.bump();
        Ok(())
    }

    /// Deletes users; returns how many existed. The default user can't be deleted.
    pub fn delete_users(&self, names: &[String]) -> Result<usize, String> {
        if names.iter().any(|n| n == "default") {
            return Err("ERR The 'default' user cannot be removed".into());
        }
        let mut users = self.users.write();
        let n = names.iter().filter(|n| users.remove(n.as_str()).is_some()).count();
        drop(users);
        self.bump();
        Ok(n)
    }

    pub fn usernames(&self) -> Vec<String> {
        self.users.read().keys().cloned().collect()
    }

    pub fn list(&self) -> Vec<String> {
        self.users.read().values().map(|u| u.describe()).collect()
    }

    /// Records a denial (or failed AUTH) in the log, merging it with a recent identical one.
    pub fn log(&self, reason: &'static str, context: &'static str, object: String, username: String, client_info: String) {
        let mut log = self.log.lock();
        let now = Instant::now();
        if let Some(pos) = log.iter().position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now.duration_since(e.updated).as_secs() < LOG_GROUP_SECS
        }) {
            let mut e = log.remove(pos).expect("found");
            e.count += 1;
            e.updated = now;
            e.client_info = client_info;
            log.push_front(e);
            return;
        }
        log.push_front(LogEntry { count: 1, reason, context, object, username, created: now, updated: now, client_info });
        log.truncate(LOG_MAX);
    }

    pub fn log_denied(&self, d: &Denied, context: &'static str, username: &str, client_info: String) {
        self.log(d.reason(), context, d.object(), username.to_string(), client_info);
    }

    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().iter().take(count).cloned().collect()
    }

    pub fn log_reset(&self) {
        self.log.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new("u");
        u.apply("resetchannels").unwrap();
        for r in rules {
            u.apply(r).unwrap();
        }
        u
    }

    #[test]
    fn rules_describe_as_written() {
        let u = user(&["reset", "on", ">p1", "~cache:*", "%R~r:*", "&ch*", "+@set", "+get", "-hset", "+get"]);
        assert_eq!(u.describe(), format!("user u on sanitize-payload #{} ~cache:* %R~r:* resetchannels &ch* -@all +@set -hset +get", hash_password(b"p1")));
        assert_eq!(User::default_user().describe(), "user default on nopass ~* &* +@all");
        let sel = user(&["(+set %W~app*)"]);
        assert!(sel.describe().ends_with("(%W~app* resetchannels -@all +set)"), "{}", sel.describe());
    }

    #[test]
    fn checks_commands_subcommands_and_keys() {
        let idx = |n: &str| INDEX[n];
        let u = user(&["on", "nopass", "+get", "+set", "+client|id", "~cache:*", "%R~ro:*"]);
        assert!(u.check(idx("get"), &[b"get", b"cache:1"]).is_ok());
        assert_eq!(u.check(idx("get"), &[b"get", b"other"]), Err(Denied::Key(b"other".to_vec())));
        assert!(u.check(idx("get"), &[b"get", b"ro:1"]).is_ok());
        assert_eq!(u.check(idx("set"), &[b"set", b"ro:1", b"v"]), Err(Denied::Key(b"ro:1".to_vec())));
        assert_eq!(u.check(idx("hset"), &[b"hset", b"cache:1", b"f", b"v"]), Err(Denied::Command("hset".into())));
        assert!(u.check(idx("client"), &[b"client", b"id"]).is_ok());
        assert_eq!(u.check(idx("client"), &[b"client", b"kill", b"x"]), Err(Denied::Command("client|kill".into())));
        // A selector grants what the root permissions don't.
        let s = user(&["on", "nopass", "(+hset ~h:*)"]);
        assert!(s.check(idx("hset"), &[b"hset", b"h:1", b"f", b"v"]).is_ok());
        assert!(s.check(idx("hset"), &[b"hset", b"x", b"f", b"v"]).is_err());
    }

    #[test]
    fn passwords_and_errors() {
        let mut u = user(&[">secret"]);
        assert!(u.password_ok(b"secret") && !u.password_ok(b"nope"));
        assert!(u.apply("<nope").unwrap_err().contains("does not exist"));
        assert!(u.apply("#abc").unwrap_err().contains("64 characters"));
        assert!(u.apply("+nosuch").unwrap_err().contains("Unknown command"));
        assert!(u.apply("get").unwrap_err().contains("Syntax error"));
        u.apply("allkeys").unwrap();
        assert!(u.apply("~x").unwrap_err().contains("allkeys"));
        assert_eq!(merge_selector_args(&[b"(+get", b"~x)", b"on"]).unwrap(), vec!["(+get ~x)", "on"]);
        assert!(merge_selector_args(&[b"(+get"]).is_err());
    }
}
