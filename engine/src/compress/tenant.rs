//! One tenant's compression state: its settings, its dictionary generations (32 slots named by
//! the value header), the write sample, the monitor that triggers retraining, and the census
//! the background pass takes so old generations can be dropped.
//!
//! Hot paths: `encode_for_write` (eager mode) and `decode` take a read lock on the generations
//! and touch a few relaxed counters. Training runs on its own thread; installing a generation
//! writes its dictionary file first, so no value is ever encoded with an unsaved dictionary.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

use super::advise::{advise, Advice, DEFAULT_CPU_BUDGET_US};
use super::sample::Reservoir;
use super::store;
use super::train::{stored_size, train};
use super::{header, parse_header, Choice, Codec, CodecError, CodecKind, Mode, SLOTS};

/// A tenant's compression settings (engine defaults, overridden per tenant).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub choice: Choice,
    pub mode: Mode,
    /// Values shorter than this are stored raw.
    pub min_size: usize,
    /// Lazy mode: seconds without a read before a value is compressed.
    pub cold_seconds: u64,
    /// Retrain when the live ratio is worse than the trained one by more than this share.
    pub retrain_ratio_drift: f64,
    /// Retrain when more than this share of values match no template.
    pub retrain_unmatched: f64,
    /// Values kept in the training sample.
    pub sample_size: usize,
    /// Samples needed before the first training.
    pub train_after: usize,
    /// Recommender: CPU a codec may add per operation (µs).
    pub cpu_budget_us: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            choice: Choice::None,
            mode: Mode::Eager,
            min_size: 32,
            cold_seconds: 60,
            retrain_ratio_drift: 0.10,
            retrain_unmatched: 0.20,
            sample_size: 1024,
            train_after: 256,
            cpu_budget_us: DEFAULT_CPU_BUDGET_US,
        }
    }
}

impl Settings {
    /// Sets one setting by its configuration name (`compression`, `compression_mode`, …).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let num = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
        let bad = |what: &str| format!("'{value}' is not {what}");
        match key.to_ascii_lowercase().replace('-', "_").as_str() {
            "compression" | "codec" => self.choice = Choice::parse(value).ok_or_else(|| bad("none, zstd, zstd-dict, pattern or auto"))?,
            "compression_mode" | "mode" => self.mode = Mode::parse(value).ok_or_else(|| bad("eager or lazy"))?,
            "compression_min_size" | "min_size" => self.min_size = value.parse().map_err(|_| bad("a byte count"))?,
            "compression_cold_seconds" | "cold_seconds" => self.cold_seconds = value.parse().map_err(|_| bad("a number of seconds"))?,
            "retrain_ratio_drift" => self.retrain_ratio_drift = num(value).ok_or_else(|| bad("a share such as 0.1"))?,
            "retrain_unmatched" => self.retrain_unmatched = num(value).ok_or_else(|| bad("a share such as 0.2"))?,
            "compression_sample_size" | "sample_size" => {
                self.sample_size = value.parse().ok().filter(|n| (16..=1_000_000).contains(n)).ok_or_else(|| bad("a sample size from 16 to 1000000"))?
            }
            "compression_train_after" | "train_after" => {
                self.train_after = value.parse().ok().filter(|n| *n >= 8).ok_or_else(|| bad("a sample count of at least 8"))?
            }
            "compression_cpu_budget_us" | "cpu_budget_us" => self.cpu_budget_us = num(value).ok_or_else(|| bad("microseconds"))?,
            other => return Err(format!("unknown compression setting '{other}'")),
        }
        Ok(())
    }

    pub fn to_json(&self) -> Value {
        json!({
            "compression": self.choice.to_string(),
            "compression_mode": self.mode.name(),
            "compression_min_size": self.min_size,
            "compression_cold_seconds": self.cold_seconds,
            "retrain_ratio_drift": self.retrain_ratio_drift,
            "retrain_unmatched": self.retrain_unmatched,
            "compression_sample_size": self.sample_size,
            "compression_train_after": self.train_after,
            "compression_cpu_budget_us": self.cpu_budget_us,
        })
    }

    /// Reads settings saved by `to_json`.
    pub fn from_json(v: &Value, base: &Settings) -> Result<Settings, String> {
        let mut s = base.clone();
        let obj = v.as_object().ok_or("settings are not a JSON object")?;
        for (k, v) in obj {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            s.set(k, &text)?;
        }
        Ok(s)
    }
}

/// A tenant's files read back at start: its settings (if saved) and its generations.
pub struct LoadedTenant {
    pub settings: Option<Settings>,
    pub generations: Vec<(u32, Arc<dyn Codec>)>,
}

/// Reads every tenant's dictionaries and settings under `root`. A missing, damaged or
/// undecodable file is an error naming the tenant and the file.
pub fn load_dir(root: &std::path::Path, base: &Settings) -> Result<std::collections::HashMap<String, LoadedTenant>, store::StoreError> {
    let mut out = std::collections::HashMap::new();
    for (tenant, dicts) in store::load_all(root)? {
        let settings_path = store::tenant_dir(root, &tenant).join("tenant.json");
        let settings = match std::fs::read(&settings_path) {
            Err(_) => None,
            Ok(bytes) => {
                let corrupt = |reason: String| store::StoreError::Corrupt { tenant: tenant.clone(), path: settings_path.display().to_string(), reason };
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
                Some(Settings::from_json(&v, base).map_err(corrupt)?)
            }
        };
        let mut generations = Vec::new();
        for d in dicts {
            let codec = super::deserialize(d.kind, &d.payload).map_err(|e| store::StoreError::from((tenant.clone(), d.path.clone(), e)))?;
            generations.push((d.generation, codec));
        }
        out.insert(tenant, LoadedTenant { settings, generations });
    }
    Ok(out)
}

/// One trained dictionary generation.
pub struct Generation {
    pub number: u32,
    pub codec: Arc<dyn Codec>,
    /// Stored/raw ratio on the sample it was trained on.
    pub trained_ratio: f64,
    pub unmatched_share: Option<f64>,
    pub templates: Option<usize>,
    pub samples: usize,
    pub train_seconds: f64,
    pub reason: String,
}

#[derive(Default)]
struct Generations {
    slots: [Option<Arc<Generation>>; SLOTS as usize],
    current: Option<u8>,
    last_number: u32,
}

/// Live counters of the current generation (the monitor's input).
#[derive(Default)]
struct Live {
    raw: AtomicU64,
    stored: AtomicU64,
    values: AtomicU64,
    unmatched: AtomicU64,
}

impl Live {
    fn reset(&self) {
        for c in [&self.raw, &self.stored, &self.values, &self.unmatched] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// What the background pass counted in its last full cycle.
#[derive(Default, Clone, Debug)]
pub struct Census {
    /// Per slot: values and stored bytes.
    pub per_slot: Vec<(u64, u64)>,
    pub plain_values: u64,
    pub plain_bytes: u64,
}

impl Census {
    pub fn new() -> Census {
        Census { per_slot: vec![(0, 0); SLOTS as usize], plain_values: 0, plain_bytes: 0 }
    }

    /// Counts a value stored compressed (header + payload).
    pub fn compressed(&mut self, stored: &[u8]) {
        let slot = TenantCompression::slot_of(stored).unwrap_or(0) as usize;
        self.per_slot[slot].0 += 1;
        self.per_slot[slot].1 += stored.len() as u64;
    }

    /// Counts a value stored plain.
    pub fn plain(&mut self, value: &[u8]) {
        self.plain_values += 1;
        self.plain_bytes += value.len() as u64;
    }
}

pub struct TenantCompression {
    name: RwLock<String>,
    settings: RwLock<Settings>,
    enabled: AtomicBool,
    eager: AtomicBool,
    min_size: AtomicUsize,
    gens: RwLock<Generations>,
    /// Values written since the last training.
    pub sample: Reservoir,
    /// Values written since the start (a uniform sample of the tenant's whole history).
    history: Reservoir,
    training: AtomicBool,
    live: Live,
    reads: AtomicU64,
    writes: AtomicU64,
    decode_errors: AtomicU64,
    retrains: AtomicU64,
    /// Full cycles of the background pass (each ends with a census).
    cycles: AtomicU64,
    /// Set when the pass should not wait for its rest to end (new settings or generation).
    wake: AtomicBool,
    last_error: Mutex<Option<String>>,
    last_advice: Mutex<Option<Advice>>,
    census: Mutex<Census>,
    /// Where dictionary files go (None: not persisted, as in unit tests).
    root: Option<PathBuf>,
    /// Bumped by `reset`: a training started before it installs nothing.
    epoch: AtomicU64,
}

impl TenantCompression {
    pub fn new(settings: Settings, root: Option<PathBuf>) -> TenantCompression {
        let t = TenantCompression {
            name: RwLock::new(String::new()),
            sample: Reservoir::new(settings.sample_size, 16 * 1024),
            history: Reservoir::new(settings.sample_size, 16 * 1024),
            settings: RwLock::new(settings.clone()),
            enabled: AtomicBool::new(false),
            eager: AtomicBool::new(false),
            min_size: AtomicUsize::new(0),
            gens: RwLock::new(Generations::default()),
            training: AtomicBool::new(false),
            live: Live::default(),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            decode_errors: AtomicU64::new(0),
            retrains: AtomicU64::new(0),
            cycles: AtomicU64::new(0),
            wake: AtomicBool::new(false),
            last_error: Mutex::new(None),
            last_advice: Mutex::new(None),
            census: Mutex::new(Census::new()),
            root,
            epoch: AtomicU64::new(0),
        };
        t.publish(&settings);
        t
    }

    fn publish(&self, s: &Settings) {
        self.enabled.store(s.choice != Choice::None, Ordering::Relaxed);
        self.eager.store(s.mode == Mode::Eager, Ordering::Relaxed);
        self.min_size.store(s.min_size, Ordering::Relaxed);
    }

    pub fn name(&self) -> String {
        let n = self.name.read();
        if n.is_empty() {
            "default".into()
        } else {
            n.clone()
        }
    }

    pub fn set_name(&self, name: &str) {
        *self.name.write() = name.to_string();
    }

    pub fn settings(&self) -> Settings {
        self.settings.read().clone()
    }

    /// Back to a new tenant's state with `settings` (its namespace was dropped and emptied;
    /// the next tenant given this number must not inherit its dictionaries, samples,
    /// counters or settings): its dictionary files are deleted, a training still running
    /// installs nothing.
    pub fn reset(&self, settings: Settings) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if let Some(root) = &self.root {
            let name = std::mem::take(&mut *self.name.write());
            let dir = store::tenant_dir(root, &name);
            if !name.is_empty() {
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!("removing the dropped tenant's dictionaries {}: {e}", dir.display());
                    }
                }
            }
        }
        *self.gens.write() = Generations::default();
        self.sample.resize(settings.sample_size);
        self.history.resize(settings.sample_size);
        self.publish(&settings);
        *self.settings.write() = settings;
        self.live.reset();
        for c in [&self.reads, &self.writes, &self.decode_errors, &self.retrains, &self.cycles] {
            c.store(0, Ordering::Relaxed);
        }
        *self.last_error.lock() = None;
        *self.last_advice.lock() = None;
        *self.census.lock() = Census::new();
    }

    /// Applies new settings; a new codec choice starts a new generation.
    pub fn configure(self: &Arc<Self>, s: Settings) {
        if *self.settings.read() == s {
            return;
        }
        let old = std::mem::replace(&mut *self.settings.write(), s.clone());
        self.publish(&s);
        self.wake();
        if s.sample_size != old.sample_size {
            // A reservoir's capacity is fixed; a new size takes effect on fresh samples.
            self.sample.resize(s.sample_size);
            self.history.resize(s.sample_size);
        }
        if s.choice != old.choice {
            let current_kind = self.current().map(|g| g.codec.kind());
            let wanted = match s.choice {
                Choice::Codec(k) => Some(k),
                _ => None,
            };
            if wanted.is_some() && wanted != current_kind {
                self.maybe_train("codec changed");
            }
        }
        self.save_settings();
    }

    fn save_settings(&self) {
        if let Some(root) = &self.root {
            let path = store::tenant_dir(root, &self.name.read()).join("tenant.json");
            let body = self.settings.read().to_json().to_string();
            if let Err(e) = store::write_atomic(&path, body.as_bytes()) {
                tracing::warn!("saving compression settings: {e}");
            }
        }
    }

    /// Whether the background pass was asked to run now (cleared by asking).
    pub fn take_wake(&self) -> bool {
        self.wake.swap(false, Ordering::Relaxed)
    }

    /// Asks the background pass to run now (tests and STATS callers who want a fresh census).
    pub fn wake(&self) {
        self.wake.store(true, Ordering::Relaxed);
    }

    /// Whether compressed values turn plain again when read (lazy mode: a read makes a value
    /// hot, and hot values stay at raw speed).
    #[inline]
    pub fn promotes_on_read(&self) -> bool {
        !self.eager.load(Ordering::Relaxed)
    }

    /// Whether values of this tenant are compressed at all.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn current(&self) -> Option<Arc<Generation>> {
        let g = self.gens.read();
        g.current.and_then(|s| g.slots[s as usize].clone())
    }

    /// The write path: samples the value and, in eager mode, encodes it into `out` (header +
    /// payload). False: store it raw.
    pub fn encode_for_write(self: &Arc<Self>, value: &[u8], out: &mut Vec<u8>) -> bool {
        if !self.enabled() {
            return false;
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        if value.len() < self.min_size.load(Ordering::Relaxed) {
            return false;
        }
        self.sample.offer(value);
        self.history.offer(value);
        if !self.eager.load(Ordering::Relaxed) {
            return false;
        }
        self.encode(value, out)
    }

    /// Encodes with the current generation (eager writes, the lazy pass, re-encoding).
    pub fn encode(self: &Arc<Self>, value: &[u8], out: &mut Vec<u8>) -> bool {
        let gen = {
            let g = self.gens.read();
            g.current.and_then(|s| g.slots[s as usize].clone().map(|gen| (s, gen)))
        };
        let Some((slot, gen)) = gen else {
            self.maybe_train("first training");
            return false;
        };
        out.clear();
        out.push(header(gen.codec.kind(), slot));
        let ok = gen.codec.encode(value, out).is_ok();
        let shrunk = ok && out.len() < value.len();
        self.live.raw.fetch_add(value.len() as u64, Ordering::Relaxed);
        self.live.stored.fetch_add(if shrunk { out.len() } else { value.len() } as u64, Ordering::Relaxed);
        self.live.values.fetch_add(1, Ordering::Relaxed);
        if ok && gen.codec.last_unmatched() {
            self.live.unmatched.fetch_add(1, Ordering::Relaxed);
        }
        shrunk
    }

    /// Decodes a stored value (header + payload), appending to `out`.
    pub fn decode(&self, stored: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let (&h, payload) = stored.split_first().ok_or(CodecError::Corrupt("empty value"))?;
        let (kind, slot) = parse_header(h).ok_or(CodecError::Corrupt("unknown codec in header"))?;
        let g = self.gens.read();
        let gen = g.slots[slot as usize].as_ref().filter(|gen| gen.codec.kind() == kind);
        let gen = gen.ok_or(CodecError::MissingDictionary { codec: kind.name(), slot })?;
        gen.codec.decode(payload, out).inspect_err(|_| {
            self.decode_errors.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// Counts a client's read of a string (the recommender's read/write mix).
    #[inline]
    pub fn note_read(&self) {
        if self.enabled() {
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The dictionary slot of a stored value.
    pub fn slot_of(stored: &[u8]) -> Option<u8> {
        stored.first().and_then(|&h| parse_header(h)).map(|(_, s)| s)
    }

    /// Whether a stored value was encoded by an older generation.
    pub fn is_stale(&self, stored: &[u8]) -> bool {
        Self::slot_of(stored) != self.gens.read().current
    }

    /// Whether the pass should compress a plain value now (eager: always; lazy: when cold).
    pub fn wants_plain(&self, len: usize, idle_seconds: u64) -> bool {
        if !self.enabled() || len < self.min_size.load(Ordering::Relaxed) || self.gens.read().current.is_none() {
            return false;
        }
        self.eager.load(Ordering::Relaxed) || idle_seconds >= self.settings.read().cold_seconds
    }

    /// Starts a training run on its own thread unless one is running or the sample is small.
    pub fn maybe_train(self: &Arc<Self>, reason: &str) {
        let s = self.settings();
        self.start_training(reason, s.train_after.min(s.sample_size), false);
    }

    /// Starts a training with at least `min_samples` values (zstd: installs it at once, once
    /// per choice unless `again`).
    fn start_training(self: &Arc<Self>, reason: &str, min_samples: usize, again: bool) {
        let s = self.settings();
        let kind = match s.choice {
            Choice::None => return,
            Choice::Codec(CodecKind::Zstd) => {
                // Nothing to learn.
                let installed = self.current().map(|g| g.codec.kind()) == Some(CodecKind::Zstd);
                if (again || !installed) && !self.training.swap(true, Ordering::AcqRel) {
                    let r = train(CodecKind::Zstd, &[b"".to_vec()]).map(|t| (t, 1.0, 0));
                    self.finish_training(r.map_err(|e| e.to_string()), reason);
                }
                return;
            }
            Choice::Codec(k) => Some(k),
            Choice::Auto => None,
        };
        if self.training_sample_len() < min_samples {
            return;
        }
        if self.training.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let reason = reason.to_string();
        let epoch = self.epoch.load(Ordering::Acquire);
        let spawned = std::thread::Builder::new().name("terrace-train".into()).spawn(move || {
            let sample = me.training_sample();
            let result = me.train_now(kind, &sample, &s);
            if me.epoch.load(Ordering::Acquire) != epoch {
                // The tenant was dropped meanwhile: its sample is not the next tenant's.
                me.training.store(false, Ordering::Release);
                return;
            }
            me.finish_training(result, &reason);
        });
        if spawned.is_err() {
            self.training.store(false, Ordering::Release);
        }
    }

    /// What a training learns from: up to half the sample from the values written since the
    /// last training (what drifted), the rest from the tenant's whole history (so a training
    /// right after a burst of one kind of value still knows the others).
    fn training_sample(&self) -> Vec<Box<[u8]>> {
        let n = self.settings().sample_size;
        let mut recent = self.sample.snapshot();
        let history = self.history.snapshot();
        let take_recent = recent.len().min(n / 2).max(n.saturating_sub(history.len()));
        let spare = recent.split_off(take_recent.min(recent.len()));
        let mut out = recent;
        out.extend(history.into_iter().take(n - out.len()));
        out.extend(spare.into_iter().take(n.saturating_sub(out.len())));
        out
    }

    fn training_sample_len(&self) -> usize {
        (self.sample.len() + self.history.len()).min(self.settings().sample_size)
    }

    /// Trains synchronously (the training thread; `TERRACE.RETRAIN … SYNC`).
    fn train_now(&self, kind: Option<CodecKind>, sample: &[Box<[u8]>], s: &Settings) -> Result<(super::train::Trained, f64, usize), String> {
        let kind = match kind {
            Some(k) => k,
            None => {
                let (r, w) = (self.reads.load(Ordering::Relaxed), self.writes.load(Ordering::Relaxed));
                let a = advise(sample, r, w, s.cpu_budget_us);
                let choice = a.choice;
                *self.last_advice.lock() = Some(a);
                choice.ok_or("the recommender found no codec worth using for this tenant")?
            }
        };
        // The baseline the monitor compares against is measured out of sample: a model
        // trained on four fifths, measured on the rest (a ratio measured on the training data
        // itself would be optimistic and make every later value look like drift).
        let (fit, held): (Vec<&[u8]>, Vec<&[u8]>) = {
            let (mut fit, mut held) = (Vec::new(), Vec::new());
            for (i, v) in sample.iter().enumerate() {
                if i % 5 == 4 {
                    held.push(&v[..])
                } else {
                    fit.push(&v[..])
                }
            }
            (fit, held)
        };
        let baseline = match train(kind, &fit) {
            Ok(probe) if !held.is_empty() => {
                let mut scratch = Vec::new();
                let raw: usize = held.iter().map(|v| v.len()).sum();
                let stored: usize = held.iter().map(|v| stored_size(&*probe.codec, v, &mut scratch)).sum();
                stored as f64 / raw.max(1) as f64
            }
            _ => f64::NAN,
        };
        let t = train(kind, sample).map_err(|e| e.to_string())?;
        Ok((t, baseline, sample.len()))
    }

    fn finish_training(self: &Arc<Self>, result: Result<(super::train::Trained, f64, usize), String>, reason: &str) {
        let outcome = result.and_then(|(t, ratio, samples)| self.install(t, ratio, samples, reason));
        match outcome {
            Ok(()) => *self.last_error.lock() = None,
            Err(e) => {
                tracing::warn!("compression training for tenant '{}': {e}", self.name());
                *self.last_error.lock() = Some(e);
            }
        }
        self.training.store(false, Ordering::Release);
    }

    /// Makes a trained codec the current generation (after saving its dictionary).
    fn install(&self, t: super::train::Trained, trained_ratio: f64, samples: usize, reason: &str) -> Result<(), String> {
        let number = self.gens.read().last_number + 1;
        let slot = (number % SLOTS) as u8;
        if self.gens.read().slots[slot as usize].is_some() {
            return Err(format!("dictionary slot {slot} still holds a live generation; the re-encode pass has not caught up (try again later)"));
        }
        if let Some(root) = &self.root {
            let name = self.name.read().clone();
            store::save(root, &name, number, t.codec.kind(), &t.codec.serialize()).map_err(|e| e.to_string())?;
            let mut live = self.live_generations();
            live.push(number);
            store::save_manifest(root, &name, &live).map_err(|e| e.to_string())?;
        }
        let gen = Generation {
            number,
            codec: t.codec,
            trained_ratio,
            unmatched_share: t.unmatched_share,
            templates: t.templates,
            samples,
            train_seconds: t.seconds,
            reason: reason.to_string(),
        };
        {
            let mut g = self.gens.write();
            g.slots[slot as usize] = Some(Arc::new(gen));
            g.current = Some(slot);
            g.last_number = number;
        }
        self.live.reset();
        self.retrains.fetch_add(1, Ordering::Relaxed);
        self.wake();
        // The next training learns from what is written from now on.
        self.sample.clear();
        Ok(())
    }

    /// Takes over what was saved for this tenant: settings and dictionary generations.
    pub fn adopt(&self, loaded: LoadedTenant) {
        if let Some(s) = loaded.settings {
            self.publish(&s);
            *self.settings.write() = s;
        }
        for (number, codec) in loaded.generations {
            self.load_generation(number, codec);
        }
    }

    /// Installs a generation read from disk at start (the newest becomes current).
    pub fn load_generation(&self, number: u32, codec: Arc<dyn Codec>) {
        let slot = (number % SLOTS) as u8;
        let mut g = self.gens.write();
        g.slots[slot as usize] = Some(Arc::new(Generation {
            number,
            codec,
            trained_ratio: f64::NAN,
            unmatched_share: None,
            templates: None,
            samples: 0,
            train_seconds: 0.0,
            reason: "loaded from disk".into(),
        }));
        if number >= g.last_number {
            g.last_number = number;
            g.current = Some(slot);
        }
    }

    /// Trains now on the current sample (TERRACE.RETRAIN): errors if one is running or there
    /// is nothing to learn from; the work itself runs on the training thread.
    pub fn retrain(self: &Arc<Self>) -> Result<(), String> {
        let s = self.settings();
        if s.choice == Choice::None {
            return Err("compression is off for this tenant (set `compression` first)".into());
        }
        if self.training.load(Ordering::Acquire) {
            return Err("a training run is already in progress".into());
        }
        let needed = 8;
        if s.choice != Choice::Codec(CodecKind::Zstd) && self.training_sample_len() < needed {
            return Err(format!("the sample holds {} values; at least {needed} are needed", self.training_sample_len()));
        }
        // On request, train on whatever the sample holds.
        self.start_training("requested", needed, true);
        Ok(())
    }

    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Acquire)
    }

    /// The monitor (called about once a second): retrains when the live ratio drifted from
    /// the trained one, or too many values match no template.
    pub fn check_drift(self: &Arc<Self>) {
        let Some(gen) = self.current() else {
            if self.enabled() {
                self.maybe_train("first training");
            }
            return;
        };
        let s = self.settings();
        let values = self.live.values.load(Ordering::Relaxed);
        if values < s.train_after as u64 || !gen.trained_ratio.is_finite() || gen.codec.kind() == CodecKind::Zstd {
            return;
        }
        let live = self.live.stored.load(Ordering::Relaxed) as f64 / self.live.raw.load(Ordering::Relaxed).max(1) as f64;
        let unmatched = self.live.unmatched.load(Ordering::Relaxed) as f64 / values as f64;
        if live > gen.trained_ratio * (1.0 + s.retrain_ratio_drift) {
            self.maybe_train(&format!("ratio drifted from {:.3} to {:.3}", gen.trained_ratio, live));
        } else if gen.codec.kind() == CodecKind::Pattern && unmatched > s.retrain_unmatched {
            self.maybe_train(&format!("{:.0}% of values matched no template", unmatched * 100.0));
        }
    }

    /// Takes the background pass's census of a full cycle; generations other than the current
    /// one that no value uses any more are dropped, with their files.
    pub fn finish_cycle(&self, census: Census, stale_at_start: &[u8]) {
        let mut dropped = Vec::new();
        {
            let mut g = self.gens.write();
            for &slot in stale_at_start {
                if census.per_slot[slot as usize].0 == 0 && g.current != Some(slot) {
                    if let Some(gen) = g.slots[slot as usize].take() {
                        dropped.push(gen.number);
                    }
                }
            }
        }
        if let (Some(root), false) = (&self.root, dropped.is_empty()) {
            let name = self.name.read().clone();
            // The manifest first: a crash in between leaves an unlisted file, never a listed
            // file that is gone.
            if let Err(e) = store::save_manifest(root, &name, &self.live_generations()) {
                tracing::warn!("compression manifest of tenant '{name}': {e}");
            } else {
                for n in dropped {
                    store::remove(root, &name, n);
                }
            }
        }
        *self.census.lock() = census;
        self.cycles.fetch_add(1, Ordering::Relaxed);
    }

    /// Numbers of the generations held, oldest first.
    fn live_generations(&self) -> Vec<u32> {
        let g = self.gens.read();
        let mut v: Vec<u32> = g.slots.iter().flatten().map(|gen| gen.number).collect();
        v.sort_unstable();
        v
    }

    /// Slots holding generations other than the current one.
    pub fn stale_slots(&self) -> Vec<u8> {
        let g = self.gens.read();
        (0..SLOTS as u8).filter(|&s| g.slots[s as usize].is_some() && g.current != Some(s)).collect()
    }

    /// Runs the recommender on the current sample (TERRACE.COMPRESSION ADVISE).
    pub fn advise_now(&self) -> Value {
        let s = self.settings();
        let sample = self.training_sample();
        let a = advise(&sample, self.reads.load(Ordering::Relaxed), self.writes.load(Ordering::Relaxed), s.cpu_budget_us);
        let mut v = a.to_json();
        v["tenant"] = json!(self.name());
        v["sample_values"] = json!(sample.len());
        *self.last_advice.lock() = Some(a);
        v
    }

    /// TERRACE.COMPRESSION STATS.
    pub fn stats(&self) -> Value {
        let s = self.settings();
        let census = self.census.lock().clone();
        let g = self.gens.read();
        let generations: Vec<Value> = (0..SLOTS as usize)
            .filter_map(|slot| g.slots[slot].as_ref().map(|gen| (slot, gen)))
            .map(|(slot, gen)| {
                json!({
                    "generation": gen.number,
                    "slot": slot,
                    "codec": gen.codec.kind().name(),
                    "current": g.current == Some(slot as u8),
                    "values": census.per_slot[slot].0,
                    "stored_bytes": census.per_slot[slot].1,
                    "dictionary_bytes": gen.codec.dictionary_bytes(),
                    "trained_ratio": gen.trained_ratio.is_finite().then_some(gen.trained_ratio),
                    "templates": gen.templates,
                    "unmatched_share": gen.unmatched_share,
                    "samples": gen.samples,
                    "train_seconds": gen.train_seconds,
                    "reason": gen.reason,
                })
            })
            .collect();
        let current = g.current.and_then(|c| g.slots[c as usize].clone());
        drop(g);
        let values = self.live.values.load(Ordering::Relaxed);
        let raw = self.live.raw.load(Ordering::Relaxed);
        json!({
            "tenant": self.name(),
            "settings": s.to_json(),
            "codec": current.as_ref().map(|g| g.codec.kind().name()),
            "generation": current.as_ref().map(|g| g.number),
            "trained_ratio": current.as_ref().and_then(|g| g.trained_ratio.is_finite().then_some(g.trained_ratio)),
            "live_ratio": (raw > 0).then(|| self.live.stored.load(Ordering::Relaxed) as f64 / raw as f64),
            "live_values": values,
            "live_unmatched_share": (values > 0).then(|| self.live.unmatched.load(Ordering::Relaxed) as f64 / values as f64),
            "sample_values": self.sample.len(),
            "training": self.is_training(),
            "retrains": self.retrains.load(Ordering::Relaxed),
            "census_cycles": self.cycles.load(Ordering::Relaxed),
            "reads": self.reads.load(Ordering::Relaxed),
            "writes": self.writes.load(Ordering::Relaxed),
            "decode_errors": self.decode_errors.load(Ordering::Relaxed),
            "last_error": self.last_error.lock().clone(),
            "compressed_values": census.per_slot.iter().map(|c| c.0).sum::<u64>(),
            "compressed_bytes": census.per_slot.iter().map(|c| c.1).sum::<u64>(),
            "plain_values": census.plain_values,
            "plain_bytes": census.plain_bytes,
            "generations": generations,
            "last_advice": self.last_advice.lock().as_ref().map(|a| a.to_json()),
        })
    }

    /// One INFO line's fields.
    pub fn info_line(&self) -> String {
        let s = self.settings();
        let census = self.census.lock().clone();
        let cur = self.current();
        let raw = self.live.raw.load(Ordering::Relaxed);
        format!(
            "codec={},mode={},generation={},trained_ratio={:.4},live_ratio={:.4},compressed_values={},compressed_bytes={},plain_values={},training={}",
            s.choice,
            s.mode.name(),
            cur.as_ref().map(|g| g.number).unwrap_or(0),
            cur.as_ref().map(|g| g.trained_ratio).filter(|r| r.is_finite()).unwrap_or(0.0),
            if raw > 0 { self.live.stored.load(Ordering::Relaxed) as f64 / raw as f64 } else { 0.0 },
            census.per_slot.iter().map(|c| c.0).sum::<u64>(),
            census.per_slot.iter().map(|c| c.1).sum::<u64>(),
            census.plain_values,
            self.is_training() as u8
        )
    }

    /// Waits for a running training to end (tests, SYNC).
    pub fn wait_idle(&self, timeout: std::time::Duration) -> bool {
        let start = std::time::Instant::now();
        while self.is_training() {
            if start.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(i: usize, shape: u8) -> Vec<u8> {
        match shape {
            0 => format!(r#"{{"id":{},"city":"Hangzhou","zone":"Asia/Shanghai","score":{}.{:02}}}"#, 10_000 + i * 7, i % 90, i % 100).into_bytes(),
            _ => format!("GET /api/v2/orders/{}?page={} HTTP/1.1 status=200 bytes={}", i * 13, i % 40, 100 + i * 3).into_bytes(),
        }
    }

    fn tenant(choice: &str) -> Arc<TenantCompression> {
        let mut s = Settings::default();
        s.set("compression", choice).unwrap();
        s.set("train_after", "64").unwrap();
        s.min_size = 8;
        Arc::new(TenantCompression::new(s, None))
    }

    #[test]
    fn trains_after_enough_writes_then_encodes_and_decodes() {
        let t = tenant("pattern");
        let mut out = Vec::new();
        for i in 0..200 {
            assert!(!t.encode_for_write(&rec(i, 0), &mut out) || t.current().is_some());
            if t.current().is_none() {
                t.wait_idle(Duration::from_secs(10));
            }
        }
        assert!(t.wait_idle(Duration::from_secs(10)));
        let gen = t.current().expect("trained");
        assert_eq!(gen.codec.kind(), CodecKind::Pattern);
        let v = rec(5000, 0);
        assert!(t.encode_for_write(&v, &mut out));
        assert!(out.len() * 3 < v.len(), "{} of {}", out.len(), v.len());
        let mut back = Vec::new();
        t.decode(&out, &mut back).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn old_generations_stay_readable_until_the_census_drops_them() {
        let t = tenant("zstd-dict");
        for i in 0..100 {
            t.sample.offer(&rec(i, 0));
        }
        t.retrain().unwrap();
        assert!(t.wait_idle(Duration::from_secs(10)));
        let mut old = Vec::new();
        assert!(t.encode(&rec(1, 0), &mut old));
        for i in 0..100 {
            t.sample.offer(&rec(i, 1));
        }
        t.retrain().unwrap();
        assert!(t.wait_idle(Duration::from_secs(10)));
        assert_eq!(t.current().unwrap().number, 2);
        assert!(t.is_stale(&old));
        let mut back = Vec::new();
        t.decode(&old, &mut back).unwrap();
        assert_eq!(back, rec(1, 0));
        // A census that still saw a value of the old slot keeps it…
        let stale = t.stale_slots();
        assert_eq!(stale.len(), 1);
        let mut c = Census::new();
        c.per_slot[stale[0] as usize] = (1, 10);
        t.finish_cycle(c, &stale);
        assert!(t.decode(&old, &mut Vec::new()).is_ok());
        // …one that saw none drops it.
        t.finish_cycle(Census::new(), &stale);
        assert!(matches!(t.decode(&old, &mut Vec::new()), Err(CodecError::MissingDictionary { .. })));
    }

    #[test]
    fn drift_in_the_data_triggers_retraining() {
        let t = tenant("pattern");
        for i in 0..200 {
            t.sample.offer(&rec(i, 0));
        }
        t.retrain().unwrap();
        assert!(t.wait_idle(Duration::from_secs(10)));
        assert_eq!(t.current().unwrap().number, 1);
        let mut out = Vec::new();
        // Values of another shape: they match no template and compress worse.
        for i in 0..300 {
            t.encode_for_write(&rec(i, 1), &mut out);
        }
        t.check_drift();
        assert!(t.wait_idle(Duration::from_secs(10)));
        let gen = t.current().unwrap();
        assert_eq!(gen.number, 2, "retrained");
        assert!(gen.reason.contains("drifted") || gen.reason.contains("template"), "{}", gen.reason);
        assert!(t.encode_for_write(&rec(7, 1), &mut out));
        assert!(!gen.codec.last_unmatched());
    }

    #[test]
    fn settings_parse_and_name_bad_values() {
        let mut s = Settings::default();
        s.set("compression_mode", "lazy").unwrap();
        s.set("compression", "AUTO").unwrap();
        assert_eq!(s.choice, Choice::Auto);
        assert!(s.set("compression", "lz4").unwrap_err().contains("'lz4'"));
        assert!(s.set("nope", "1").unwrap_err().contains("nope"));
        let back = Settings::from_json(&s.to_json(), &Settings::default()).unwrap();
        assert_eq!(back, s);
    }
}
