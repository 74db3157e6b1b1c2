//! Templates of the pattern codec and how they are learned: records are cut into tokens,
//! grouped by shape, and the groups merged bottom-up (agglomerative clustering) by the literal
//! bytes their token sequences share (a weighted longest common subsequence). A merged
//! template keeps the tokens both sides share; everything else becomes a gap (a field).
//!
//! Cost is bounded for the request-free training thread: at most `MAX_GROUPS` shape groups
//! enter the quadratic phase, and each merge recomputes one row of the similarity matrix.

use std::collections::HashMap;

use memchr::memmem;

/// Shape groups entering the pairwise phase (the rest are matched against the result).
const MAX_GROUPS: usize = 192;
/// Tokens considered per record (longer records are cut into one trailing gap).
const MAX_TOKENS: usize = 160;
/// Below this similarity, clusters stop merging once there are few enough.
const MIN_SIMILARITY: f64 = 0.55;

/// The gap contents of one record (on the stack for up to 16 gaps).
pub type Fields<'r> = smallvec::SmallVec<[&'r [u8]; 16]>;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(Vec<u8>),
    Gap,
}

/// A template: literals and gaps, never two gaps in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub parts: Vec<Part>,
}

fn is_delim(b: u8) -> bool {
    matches!(
        b,
        b'{' | b'}'
            | b'['
            | b']'
            | b'('
            | b')'
            | b'<'
            | b'>'
            | b'"'
            | b'\''
            | b':'
            | b','
            | b';'
            | b'='
            | b'|'
            | b'&'
            | b'?'
            | b'/'
            | b'\\'
            | b' '
            | b'\t'
            | b'\r'
            | b'\n'
    )
}

/// Cuts a record into tokens: each delimiter byte alone, runs of other bytes together.
pub fn tokenize(r: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < r.len() && out.len() < MAX_TOKENS - 1 {
        if is_delim(r[i]) {
            out.push(&r[i..i + 1]);
            i += 1;
        } else {
            let s = i;
            while i < r.len() && !is_delim(r[i]) {
                i += 1;
            }
            out.push(&r[s..i]);
        }
    }
    if i < r.len() {
        out.push(&r[i..]);
    }
    out
}

/// An interned token: equal bytes, equal id (the alignment compares ids, not bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lit {
    id: u32,
    len: u32,
    bytes: std::rc::Rc<[u8]>,
}

/// A token of a template under construction: a literal or a gap.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(Lit),
    Gap,
}

impl Tok {
    fn weight(&self) -> usize {
        match self {
            Tok::Lit(l) => l.len as usize,
            Tok::Gap => 0,
        }
    }
}

/// Gives every distinct token one `Lit`.
#[derive(Default)]
struct Interner<'a> {
    ids: HashMap<&'a [u8], Lit>,
}

impl<'a> Interner<'a> {
    fn lit(&mut self, t: &'a [u8]) -> Lit {
        let next = self.ids.len() as u32;
        self.ids.entry(t).or_insert_with(|| Lit { id: next, len: t.len() as u32, bytes: t.into() }).clone()
    }
}

struct Cluster {
    toks: Vec<Tok>,
    weight: usize,
    members: usize,
}

impl Cluster {
    fn new(toks: Vec<Tok>, members: usize) -> Cluster {
        let weight = toks.iter().map(Tok::weight).sum();
        Cluster { toks, weight, members }
    }
}

/// The longest common subsequence of literal tokens, weighted by their length: its weight and
/// the aligned index pairs.
fn align(a: &[Tok], b: &[Tok], pairs: Option<&mut Vec<(usize, usize)>>) -> usize {
    let (n, m) = (a.len(), b.len());
    let w = m + 1;
    let mut dp = vec![0u32; (n + 1) * w];
    for i in 1..=n {
        for j in 1..=m {
            let same = match (&a[i - 1], &b[j - 1]) {
                (Tok::Lit(x), Tok::Lit(y)) if x.id == y.id => x.len,
                _ => 0,
            };
            let diag = if same > 0 { dp[(i - 1) * w + j - 1] + same } else { 0 };
            dp[i * w + j] = diag.max(dp[(i - 1) * w + j]).max(dp[i * w + j - 1]);
        }
    }
    if let Some(pairs) = pairs {
        let (mut i, mut j) = (n, m);
        while i > 0 && j > 0 {
            let cur = dp[i * w + j];
            if cur == dp[(i - 1) * w + j] {
                i -= 1;
            } else if cur == dp[i * w + j - 1] {
                j -= 1;
            } else {
                pairs.push((i - 1, j - 1));
                i -= 1;
                j -= 1;
            }
        }
        pairs.reverse();
    }
    dp[n * w + m] as usize
}

fn similarity(a: &Cluster, b: &Cluster) -> f64 {
    if a.weight + b.weight == 0 {
        return 1.0;
    }
    // Upper bound first: the lighter side's weight.
    let bound = 2.0 * a.weight.min(b.weight) as f64 / (a.weight + b.weight) as f64;
    if bound < 0.2 {
        return bound;
    }
    2.0 * align(&a.toks, &b.toks, None) as f64 / (a.weight + b.weight) as f64
}

/// Merges two token sequences: shared literals stay, the rest between them becomes gaps.
fn merge(a: &[Tok], b: &[Tok]) -> Vec<Tok> {
    let mut pairs = Vec::new();
    align(a, b, Some(&mut pairs));
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    for (pi, pj) in pairs.into_iter().chain(std::iter::once((a.len(), b.len()))) {
        if pi > i || pj > j {
            push_gap(&mut out);
        }
        if pi < a.len() {
            out.push(a[pi].clone());
        }
        i = pi + 1;
        j = pj + 1;
    }
    out
}

fn push_gap(out: &mut Vec<Tok>) {
    if out.last() != Some(&Tok::Gap) {
        out.push(Tok::Gap);
    }
}

/// Column-wise template of records that share a shape (same token count, same delimiters).
fn columns(records: &[&Vec<Lit>]) -> Vec<Tok> {
    let first = records[0];
    let mut out = Vec::new();
    for (c, t) in first.iter().enumerate() {
        if records.iter().all(|r| r[c].id == t.id) {
            out.push(Tok::Lit(t.clone()));
        } else {
            push_gap(&mut out);
        }
    }
    out
}

/// The shape of a record: its delimiters, with other runs as one placeholder.
fn shape(tokens: &[&[u8]]) -> Vec<u8> {
    tokens.iter().map(|t| if t.len() == 1 && is_delim(t[0]) { t[0] } else { 0 }).collect()
}

/// Turns merged tokens into a template: adjacent literals joined, a one-byte literal between
/// two gaps absorbed into them (a space inside a name is not structure).
fn finish(toks: &[Tok]) -> Template {
    let mut t: Vec<Tok> = Vec::new();
    for tok in toks {
        match tok {
            Tok::Gap => push_gap(&mut t),
            Tok::Lit(l) => t.push(Tok::Lit(l.clone())),
        }
    }
    let mut absorbed: Vec<Tok> = Vec::new();
    let mut k = 0;
    while k < t.len() {
        if let Tok::Lit(l) = &t[k] {
            let between_gaps = k > 0 && t[k - 1] == Tok::Gap && t.get(k + 1) == Some(&Tok::Gap);
            if between_gaps && l.len <= 1 {
                k += 1;
                continue; // absorbed: the next gap joins the previous one
            }
        }
        match &t[k] {
            Tok::Gap => push_gap(&mut absorbed),
            lit => absorbed.push(lit.clone()),
        }
        k += 1;
    }
    let mut parts: Vec<Part> = Vec::new();
    for tok in absorbed {
        match (tok, parts.last_mut()) {
            (Tok::Lit(l), Some(Part::Lit(prev))) => prev.extend_from_slice(&l.bytes),
            (Tok::Lit(l), _) => parts.push(Part::Lit(l.bytes.to_vec())),
            (Tok::Gap, Some(Part::Gap)) => {}
            (Tok::Gap, _) => parts.push(Part::Gap),
        }
    }
    Template { parts }
}

/// Learns up to `max` templates from `samples`.
pub fn learn(samples: &[&[u8]], max: usize) -> Vec<Template> {
    let tokenized: Vec<Vec<&[u8]>> = samples.iter().map(|s| tokenize(s)).collect();
    let mut by_shape: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
    for (i, t) in tokenized.iter().enumerate() {
        by_shape.entry(shape(t)).or_default().push(i);
    }
    let mut interner = Interner::default();
    let interned: Vec<Vec<Lit>> = tokenized.iter().map(|t| t.iter().map(|tok| interner.lit(tok)).collect()).collect();
    let mut groups: Vec<Vec<usize>> = by_shape.into_values().collect();
    groups.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    groups.truncate(MAX_GROUPS);
    let mut clusters: Vec<Cluster> = groups
        .iter()
        .map(|g| {
            let recs: Vec<&Vec<Lit>> = g.iter().map(|&i| &interned[i]).collect();
            Cluster::new(columns(&recs), g.len())
        })
        .collect();

    // Agglomerative phase over a similarity matrix; one row recomputed per merge.
    let n = clusters.len();
    let mut alive = vec![true; n];
    let mut sim = vec![0f64; n * n];
    for i in 0..n {
        for j in i + 1..n {
            sim[i * n + j] = similarity(&clusters[i], &clusters[j]);
        }
    }
    let mut count = n;
    while count > 1 {
        let mut best = (-1.0, 0, 0);
        for i in 0..n {
            if !alive[i] {
                continue;
            }
            for j in i + 1..n {
                if alive[j] && sim[i * n + j] > best.0 {
                    best = (sim[i * n + j], i, j);
                }
            }
        }
        let (s, i, j) = best;
        if s < MIN_SIMILARITY && count <= max {
            break;
        }
        let toks = merge(&clusters[i].toks, &clusters[j].toks);
        let members = clusters[i].members + clusters[j].members;
        clusters[i] = Cluster::new(toks, members);
        alive[j] = false;
        count -= 1;
        for k in 0..n {
            if alive[k] && k != i {
                let s = similarity(&clusters[i], &clusters[k]);
                let (a, b) = if k < i { (k, i) } else { (i, k) };
                sim[a * n + b] = s;
            }
        }
    }
    let mut out: Vec<(usize, Template)> = (0..n).filter(|&i| alive[i]).map(|i| (clusters[i].members, finish(&clusters[i].toks))).collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.0));
    let mut seen = Vec::new();
    out.into_iter()
        .map(|(_, t)| t)
        .filter(|t| t.parts.iter().any(|p| matches!(p, Part::Lit(_))))
        .filter(|t| {
            let new = !seen.contains(t);
            seen.push(t.clone());
            new
        })
        .collect()
}

/// A template prepared for matching: its literals with searchers.
pub struct Matcher {
    pub template: Template,
    finders: Vec<Option<memmem::Finder<'static>>>,
    pub literal_bytes: usize,
    pub gaps: usize,
}

impl Matcher {
    pub fn new(template: Template) -> Matcher {
        let finders = template.parts.iter().map(|p| match p {
            Part::Lit(l) => Some(memmem::Finder::new(l).into_owned()),
            Part::Gap => None,
        });
        let literal_bytes = template.parts.iter().map(|p| if let Part::Lit(l) = p { l.len() } else { 0 }).sum();
        let gaps = template.parts.iter().filter(|p| matches!(p, Part::Gap)).count();
        Matcher { finders: finders.collect(), template, literal_bytes, gaps }
    }

    /// The gap contents of `r` if it fits the template (each literal at its leftmost place
    /// after the previous one; the last literal, if last, must end the record).
    pub fn split<'r>(&self, r: &'r [u8], fields: &mut Fields<'r>) -> bool {
        fields.clear();
        let parts = &self.template.parts;
        let mut pos = 0;
        let mut gap_start: Option<usize> = None;
        for (k, p) in parts.iter().enumerate() {
            match p {
                Part::Gap => gap_start = Some(pos),
                Part::Lit(l) => {
                    let last = k + 1 == parts.len();
                    match gap_start.take() {
                        None => {
                            if !r[pos..].starts_with(l) {
                                return false;
                            }
                            pos += l.len();
                        }
                        Some(start) if last => {
                            if r.len() < start + l.len() || !r.ends_with(l) {
                                return false;
                            }
                            fields.push(&r[start..r.len() - l.len()]);
                            pos = r.len();
                        }
                        Some(start) => {
                            let finder = self.finders[k].as_ref().expect("literal has a finder");
                            let Some(at) = finder.find(&r[start..]) else { return false };
                            fields.push(&r[start..start + at]);
                            pos = start + at + l.len();
                        }
                    }
                }
            }
        }
        if let Some(start) = gap_start {
            fields.push(&r[start..]);
            pos = r.len();
        }
        pos == r.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Part {
        Part::Lit(s.as_bytes().to_vec())
    }

    #[test]
    fn json_records_merge_into_one_template_with_value_gaps() {
        let recs = [
            r#"{"id":1,"name":"les Escaldes","tz":"Europe/Andorra"}"#,
            r#"{"id":22,"name":"Andorra la Vella","tz":"Europe/Andorra"}"#,
            r#"{"id":333,"name":"Dubai","tz":"Asia/Dubai"}"#,
            r#"{"id":4444,"name":"Sharjah","tz":"Asia/Dubai"}"#,
        ];
        let samples: Vec<&[u8]> = recs.iter().map(|r| r.as_bytes()).collect();
        let ts = learn(&samples, 8);
        assert_eq!(ts.len(), 1, "{ts:?}");
        assert_eq!(ts[0].parts, vec![lit(r#"{"id":"#), Part::Gap, lit(r#","name":""#), Part::Gap, lit(r#"","tz":""#), Part::Gap, lit(r#""}"#)]);
        let m = Matcher::new(ts[0].clone());
        let mut f = Fields::new();
        assert!(m.split(br#"{"id":5,"name":"a \"q\", b","tz":""}"#, &mut f));
        assert_eq!(f.to_vec(), vec![&b"5"[..], br#"a \"q\", b"#, b""]);
        assert!(!m.split(br#"{"id":5}"#, &mut f));
        assert!(!m.split(b"", &mut f));
    }

    #[test]
    fn different_formats_get_different_templates() {
        let mut recs = Vec::new();
        for i in 0..50 {
            recs.push(format!("GET /item/{i} HTTP/1.1 200 {}", i * 31));
            recs.push(format!("{{\"user\":{i},\"ok\":true}}"));
        }
        let samples: Vec<&[u8]> = recs.iter().map(|r| r.as_bytes()).collect();
        let ts = learn(&samples, 8);
        assert!(ts.len() >= 2, "{ts:?}");
        let ms: Vec<Matcher> = ts.into_iter().map(Matcher::new).collect();
        let mut f = Fields::new();
        assert!(ms.iter().any(|m| m.split(b"GET /item/77 HTTP/1.1 200 5", &mut f) && m.gaps <= 3));
        assert!(ms.iter().any(|m| m.split(b"{\"user\":900,\"ok\":true}", &mut f) && m.gaps == 1));
    }
}
