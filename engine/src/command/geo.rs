//! GEO commands over sorted sets, with Redis's encoding: a member's score is the 52-bit
//! interleaved geohash of its position (latitude bits even, longitude bits odd), so a GEO key
//! holds exactly what Redis would hold and ZRANGE & co. work on it.
//!
//! Searches scan the whole set and test each member's distance (or box) exactly, rather than
//! Redis's nine-cell geohash neighbourhood: same results, O(N) per search.

use super::args::{err, float, int, is, CmdError};
use super::{CmdResult, Ctx, Data};
use crate::keyspace::value::{Bytes, ZSet};
use crate::keyspace::{Collection, Entry, Kind};

const STEP: u32 = 26;
const LAT_MIN: f64 = -85.051_128_78;
const LAT_MAX: f64 = 85.051_128_78;
const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
const EARTH_RADIUS_M: f64 = 6_372_797.560_856;

fn interleave(x: u32, y: u32) -> u64 {
    let spread = |v: u32| -> u64 {
        let mut v = v as u64;
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        (v | (v << 1)) & 0x5555_5555_5555_5555
    };
    spread(x) | (spread(y) << 1)
}

fn deinterleave(h: u64) -> (u32, u32) {
    let squash = |v: u64| -> u32 {
        let mut v = v & 0x5555_5555_5555_5555;
        v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF;
        v as u32
    };
    (squash(h), squash(h >> 1))
}

fn encode_range(lon: f64, lat: f64, lon_min: f64, lon_max: f64, lat_min: f64, lat_max: f64) -> u64 {
    let scale = (1u64 << STEP) as f64;
    let lat_off = ((lat - lat_min) / (lat_max - lat_min) * scale) as u32;
    let lon_off = ((lon - lon_min) / (lon_max - lon_min) * scale) as u32;
    interleave(lat_off, lon_off)
}

pub fn encode(lon: f64, lat: f64) -> u64 {
    encode_range(lon, lat, LON_MIN, LON_MAX, LAT_MIN, LAT_MAX)
}

/// The centre of a geohash cell, as (longitude, latitude).
pub fn decode(h: u64) -> (f64, f64) {
    let (ilat, ilon) = deinterleave(h);
    let scale = (1u64 << STEP) as f64;
    let lat_lo = LAT_MIN + (ilat as f64 / scale) * (LAT_MAX - LAT_MIN);
    let lat_hi = LAT_MIN + ((ilat as f64 + 1.0) / scale) * (LAT_MAX - LAT_MIN);
    let lon_lo = LON_MIN + (ilon as f64 / scale) * (LON_MAX - LON_MIN);
    let lon_hi = LON_MIN + ((ilon as f64 + 1.0) / scale) * (LON_MAX - LON_MIN);
    let lon = ((lon_lo + lon_hi) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((lat_lo + lat_hi) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (lat2.to_radians() - lat1.to_radians()).abs()
}

/// Haversine distance in meters, as Redis computes it.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((lon2.to_radians() - lon1.to_radians()) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let u = ((lat2.to_radians() - lat1.to_radians()) / 2.0).sin();
    let a = u * u + lat1.to_radians().cos() * lat2.to_radians().cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

fn unit(arg: &[u8]) -> Result<f64, CmdError> {
    match String::from_utf8_lossy(arg).to_ascii_lowercase().as_str() {
        "m" => Ok(1.0),
        "km" => Ok(1000.0),
        "ft" => Ok(0.3048),
        "mi" => Ok(1609.34),
        _ => Err(err("ERR unsupported unit provided. please use M, KM, FT, MI")),
    }
}

fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let (lon, lat) = (float(lon)?, float(lat)?);
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(err(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")));
    }
    Ok((lon, lat))
}

fn zset<'a>(data: &'a mut Data, key: &[u8]) -> Result<Option<&'a mut ZSet>, CmdError> {
    Ok(data.coll(key, Kind::ZSet)?.map(|c| match c {
        Collection::ZSet(z) => z,
        _ => unreachable!("kind checked"),
    }))
}

pub fn geoadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut i = 2;
    while i < argv.len() {
        if is(argv[i], "NX") {
            nx = true;
        } else if is(argv[i], "XX") {
            xx = true;
        } else if is(argv[i], "CH") {
            ch = true;
        } else {
            break;
        }
        i += 1;
    }
    if nx && xx {
        // (ZADD has its own words for this; GEOADD answers a syntax error.)
        return Err(CmdError::Syntax);
    }
    let triples = &argv[i..];
    if triples.is_empty() || !triples.len().is_multiple_of(3) {
        return Err(CmdError::Syntax);
    }
    let mut points = Vec::with_capacity(triples.len() / 3);
    for t in triples.chunks(3) {
        let (lon, lat) = lon_lat(t[0], t[1])?;
        points.push((t[2], encode(lon, lat) as f64));
    }
    let key = argv[1];
    if xx && zset(&mut ctx.data, key)?.is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    let z = match ctx.data.coll_or_create(key, Kind::ZSet, || Collection::ZSet(ZSet::default()))? {
        Collection::ZSet(z) => z,
        _ => unreachable!("kind checked"),
    };
    let (mut added, mut changed) = (0, 0);
    for (m, score) in points {
        match z.score(m) {
            Some(old) if !nx && old != score => {
                z.insert(m, score);
                changed += 1;
            }
            Some(_) => {}
            None if !xx => {
                z.insert(m, score);
                added += 1;
            }
            None => {}
        }
    }
    ctx.data.modified(key);
    if added > 0 {
        ctx.data.signal(key);
    }
    ctx.out.int(if ch { added + changed } else { added });
    Ok(())
}

/// Scores of the members named from `argv[2]` on, in the zset at `argv[1]`.
fn member_scores(ctx: &mut Ctx, argv: &[&[u8]]) -> Result<Vec<Option<f64>>, CmdError> {
    let z = zset(&mut ctx.data, argv[1])?;
    Ok(argv[2..].iter().map(|m| z.as_ref().and_then(|z| z.score(m))).collect())
}

pub fn geohash(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    const ALPHABET: &[u8] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let scores = member_scores(ctx, argv)?;
    ctx.out.array_len(scores.len());
    for s in scores {
        match s {
            None => ctx.out.null(),
            Some(s) => {
                // Re-encode with the standard latitude range [-90, 90] for a standard geohash.
                let (lon, lat) = decode(s as u64);
                let h = encode_range(lon, lat, -180.0, 180.0, -90.0, 90.0);
                let mut buf = [0u8; 11];
                for (i, c) in buf.iter_mut().enumerate() {
                    let idx = if i == 10 { 0 } else { (h >> (52 - (i + 1) * 5)) & 0x1f };
                    *c = ALPHABET[idx as usize];
                }
                ctx.out.bulk(&buf);
            }
        }
    }
    Ok(())
}

pub fn geopos(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let scores = member_scores(ctx, argv)?;
    ctx.out.array_len(scores.len());
    for s in scores {
        match s {
            None => ctx.out.null_array(),
            Some(s) => {
                let (lon, lat) = decode(s as u64);
                ctx.out.array_len(2);
                ctx.out.double(lon);
                ctx.out.double(lat);
            }
        }
    }
    Ok(())
}

pub fn geodist(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let u = match argv.len() {
        4 => 1.0,
        5 => unit(argv[4])?,
        _ => return Err(CmdError::Syntax),
    };
    let pos = {
        let z = zset(&mut ctx.data, argv[1])?;
        z.and_then(|z| Some((z.score(argv[2])?, z.score(argv[3])?)))
    };
    match pos {
        None => ctx.out.null(),
        Some((a, b)) => {
            let (lon1, lat1) = decode(a as u64);
            let (lon2, lat2) = decode(b as u64);
            let d = distance(lon1, lat1, lon2, lat2) / u;
            ctx.out.bulk(format!("{d:.4}").as_bytes());
        }
    }
    Ok(())
}

enum Shape {
    Radius(f64),
    Box(f64, f64),
}

struct Search {
    center: Option<(f64, f64)>,
    from_member: Option<Vec<u8>>,
    shape: Option<Shape>,
    unit: f64,
    with_coord: bool,
    with_dist: bool,
    with_hash: bool,
    count: Option<(usize, bool)>,
    sort: Option<bool>,
    store: Option<(Vec<u8>, bool)>,
}

/// Parses the options shared by GEORADIUS*, GEOSEARCH and GEOSEARCHSTORE, starting at `i`.
fn parse_options(argv: &[&[u8]], mut i: usize, s: &mut Search, allow_store: bool, geosearch: bool) -> Result<(), CmdError> {
    while i < argv.len() {
        let a = argv[i];
        let arg = |n: usize| argv.get(i + n).copied().ok_or(CmdError::Syntax);
        if is(a, "WITHCOORD") {
            s.with_coord = true;
        } else if is(a, "WITHDIST") {
            s.with_dist = true;
        } else if is(a, "WITHHASH") {
            s.with_hash = true;
        } else if is(a, "ASC") {
            s.sort = Some(true);
        } else if is(a, "DESC") {
            s.sort = Some(false);
        } else if is(a, "ANY") {
            match &mut s.count {
                Some((_, any)) => *any = true,
                None => return Err(err("ERR the ANY argument requires COUNT argument")),
            }
        } else if is(a, "COUNT") {
            let n = int(arg(1)?)?;
            if n <= 0 {
                return Err(err("ERR COUNT must be > 0"));
            }
            s.count = Some((n as usize, false));
            i += 1;
            if i + 1 < argv.len() && is(argv[i + 1], "ANY") {
                s.count = Some((n as usize, true));
                i += 1;
            }
        } else if allow_store && (is(a, "STORE") || is(a, "STOREDIST")) && !geosearch {
            s.store = Some((arg(1)?.to_vec(), is(a, "STOREDIST")));
            i += 1;
        } else if allow_store && geosearch && is(a, "STOREDIST") {
            s.store.as_mut().ok_or(CmdError::Syntax)?.1 = true;
        } else if geosearch && (is(a, "FROMMEMBER") || is(a, "FROMLONLAT")) && (s.center.is_some() || s.from_member.is_some()) {
            // A second origin, or a second shape below: Redis's parser does not take it.
            return Err(CmdError::Syntax);
        } else if geosearch && (is(a, "BYRADIUS") || is(a, "BYBOX")) && s.shape.is_some() {
            return Err(CmdError::Syntax);
        } else if geosearch && is(a, "FROMMEMBER") {
            s.from_member = Some(arg(1)?.to_vec());
            i += 1;
        } else if geosearch && is(a, "FROMLONLAT") {
            s.center = Some(lon_lat(arg(1)?, arg(2)?)?);
            i += 2;
        } else if geosearch && is(a, "BYRADIUS") {
            let r = float(arg(1)?)?;
            s.unit = unit(arg(2)?)?;
            s.shape = Some(Shape::Radius(r * s.unit));
            i += 2;
        } else if geosearch && is(a, "BYBOX") {
            let (w, h) = (float(arg(1)?)?, float(arg(2)?)?);
            s.unit = unit(arg(3)?)?;
            s.shape = Some(Shape::Box(w * s.unit, h * s.unit));
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if s.store.is_some() && (s.with_coord || s.with_dist || s.with_hash) {
        return Err(err("ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORDS options"));
    }
    Ok(())
}

/// Runs a search and replies (or stores).
fn run_search(ctx: &mut Ctx, key: &[u8], mut s: Search) -> CmdResult {
    let members: Vec<(Bytes, f64)> = match zset(&mut ctx.data, key)? {
        Some(z) => z.tree.iter().map(|e| (e.member.clone(), e.score)).collect(),
        None => {
            // A missing source answers at once, before a FROMMEMBER is looked for (Redis):
            // nothing found, and a STORE destination removed.
            if let Some((dst, _)) = &s.store {
                ctx.data.delete(dst);
                ctx.out.int(0);
            } else {
                ctx.out.array_len(0);
            }
            return Ok(());
        }
    };
    if let Some(m) = &s.from_member {
        let score = members.iter().find(|(mm, _)| &**mm == m.as_slice()).map(|(_, sc)| *sc).ok_or_else(|| err("ERR could not decode requested zset member"))?;
        s.center = Some(decode(score as u64));
    }
    let (clon, clat) = s.center.expect("center set by the caller");
    let mut hits: Vec<(Bytes, f64, f64)> = Vec::new(); // member, distance (m), score
    for (m, score) in members {
        let (lon, lat) = decode(score as u64);
        let d = match s.shape {
            Some(Shape::Radius(r)) => {
                let d = distance(clon, clat, lon, lat);
                if d > r {
                    continue;
                }
                d
            }
            Some(Shape::Box(w, h)) => {
                if lat_distance(lat, clat) > h / 2.0 || distance(lon, lat, clon, lat) > w / 2.0 {
                    continue;
                }
                distance(clon, clat, lon, lat)
            }
            None => unreachable!("shape set by the caller"),
        };
        hits.push((m, d, score));
        if let Some((n, true)) = s.count {
            if hits.len() >= n {
                break;
            }
        }
    }
    let sort = s.sort.or(if s.count.is_some_and(|(_, any)| !any) { Some(true) } else { None });
    if let Some(asc) = sort {
        hits.sort_by(|a, b| a.1.total_cmp(&b.1));
        if !asc {
            hits.reverse();
        }
    }
    if let Some((n, _)) = s.count {
        hits.truncate(n);
    }
    if let Some((dst, dist_scores)) = &s.store {
        ctx.data.delete(dst);
        if !hits.is_empty() {
            let mut z = ZSet::default();
            for (m, d, score) in &hits {
                z.insert(m, if *dist_scores { d / s.unit } else { *score });
            }
            let e = Entry::new_coll(dst, Collection::ZSet(z), &ctx.data.meta(None));
            ctx.data.insert(e);
            ctx.data.signal(dst);
        }
        ctx.out.int(hits.len() as i64);
        return Ok(());
    }
    let extra = s.with_coord as usize + s.with_dist as usize + s.with_hash as usize;
    ctx.out.array_len(hits.len());
    for (m, d, score) in &hits {
        if extra == 0 {
            ctx.out.bulk(m);
            continue;
        }
        ctx.out.array_len(1 + extra);
        ctx.out.bulk(m);
        if s.with_dist {
            ctx.out.bulk(format!("{:.4}", d / s.unit).as_bytes());
        }
        if s.with_hash {
            ctx.out.int(*score as i64);
        }
        if s.with_coord {
            let (lon, lat) = decode(*score as u64);
            ctx.out.array_len(2);
            ctx.out.double(lon);
            ctx.out.double(lat);
        }
    }
    Ok(())
}

fn new_search() -> Search {
    Search {
        center: None,
        from_member: None,
        shape: None,
        unit: 1.0,
        with_coord: false,
        with_dist: false,
        with_hash: false,
        count: None,
        sort: None,
        store: None,
    }
}

fn georadius_generic(ctx: &mut Ctx, argv: &[&[u8]], by_member: bool, read_only: bool) -> CmdResult {
    let mut s = new_search();
    let rest = if by_member {
        s.from_member = Some(argv[2].to_vec());
        3
    } else {
        s.center = Some(lon_lat(argv[2], argv[3])?);
        4
    };
    let r = float(argv[rest])?;
    if r < 0.0 {
        return Err(err("ERR radius cannot be negative"));
    }
    s.unit = unit(argv[rest + 1])?;
    s.shape = Some(Shape::Radius(r * s.unit));
    parse_options(argv, rest + 2, &mut s, !read_only, false)?;
    run_search(ctx, argv[1], s)
}

pub fn georadius(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, false, false)
}
pub fn georadius_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, false, true)
}
pub fn georadiusbymember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, true, false)
}
pub fn georadiusbymember_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, true, true)
}

fn geosearch_generic(ctx: &mut Ctx, argv: &[&[u8]], store: bool) -> CmdResult {
    let mut s = new_search();
    let (src, start) = if store {
        s.store = Some((argv[1].to_vec(), false));
        (argv[2], 3)
    } else {
        (argv[1], 2)
    };
    parse_options(argv, start, &mut s, store, true)?;
    if s.center.is_some() == s.from_member.is_some() {
        return Err(err("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch"));
    }
    if s.shape.is_none() {
        return Err(err("ERR exactly one of BYRADIUS and BYBOX can be specified for geosearch"));
    }
    run_search(ctx, src, s)
}

pub fn geosearch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    geosearch_generic(ctx, argv, false)
}
pub fn geosearchstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    geosearch_generic(ctx, argv, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_redis() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" stores this score in Redis.
        assert_eq!(encode(13.361389, 38.115556), 3_479_099_956_230_698);
        let (lon, lat) = decode(3_479_099_956_230_698);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
    }

    #[test]
    fn distance_palermo_catania() {
        let (a, b) = (decode(encode(13.361389, 38.115556)), decode(encode(15.087269, 37.502669)));
        let d = distance(a.0, a.1, b.0, b.1);
        assert!((d - 166_274.151_6).abs() < 0.01, "{d}");
    }
}
