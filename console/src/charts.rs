//! Server-side SVG charts: line charts (miss-ratio curve), charts over time (the history,
//! usage) and the PC-vs-SC scatter. Written here rather than with plotters: two small chart kinds, and SVG text needs
//! no font metrics when the browser lays it out (plotters' backends measure text with a font
//! engine). Every chart is a self-contained `<svg>` with an `id`, readable without JavaScript.

use std::fmt::Write;

const W: f64 = 560.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;
const COLORS: [&str; 6] = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2"];

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A vertical line at `x` with a label.
pub struct Marker {
    pub x: f64,
    pub label: String,
}

/// A labelled point of a scatter chart.
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub label: String,
    pub highlight: bool,
}

pub struct Axes<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x_fmt: fn(f64) -> String,
    pub y_fmt: fn(f64) -> String,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    fn of(xs: impl Iterator<Item = f64> + Clone, ys: impl Iterator<Item = f64> + Clone, y_from_zero: bool) -> Frame {
        let fin = |it: &mut dyn Iterator<Item = f64>| it.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
        let (mut x0, mut x1) = fin(&mut xs.clone());
        let (mut y0, mut y1) = fin(&mut ys.clone());
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if !y0.is_finite() {
            (y0, y1) = (0.0, 1.0);
        }
        if y_from_zero {
            y0 = y0.min(0.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= y0 {
            y1 = y0 + if y0 == 0.0 { 1.0 } else { y0.abs() * 0.1 };
        }
        // Headroom above the highest value, but a share (at most 1) stays within 100%.
        let padded = y1 + (y1 - y0) * 0.05;
        let y1 = if y1 <= 1.0 && padded > 1.0 && y0 >= 0.0 { 1.0 } else { padded };
        Frame { x0, x1, y0, y1 }
    }

    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * (W - LEFT - RIGHT)
    }

    fn py(&self, y: f64) -> f64 {
        H - BOTTOM - (y - self.y0) / (self.y1 - self.y0) * (H - TOP - BOTTOM)
    }
}

fn header(out: &mut String, a: &Axes) {
    let _ = write!(
        out,
        r##"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" aria-label="{t}"><title>{t}</title><rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/><text x="{cx}" y="18" text-anchor="middle" font-size="14" font-weight="600">{t}</text>"##,
        id = esc(a.id),
        t = esc(a.title),
        cx = W / 2.0
    );
}

/// The two axes and their labels.
fn axes(out: &mut String, x_label: &str, y_label: &str) {
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="#111"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b}" stroke="#111"/><text x="{cx}" y="{xl}" text-anchor="middle" font-size="12">{x}</text><text x="14" y="{cy}" text-anchor="middle" font-size="12" transform="rotate(-90 14 {cy})">{y}</text>"##,
        b = H - BOTTOM,
        r = W - RIGHT,
        cx = (LEFT + W - RIGHT) / 2.0,
        xl = H - 8.0,
        cy = (TOP + H - BOTTOM) / 2.0,
        x = esc(x_label),
        y = esc(y_label)
    );
}

/// Five horizontal grid lines with their values (a value the line below already shows is
/// not written again: small ranges rounded alike).
fn y_grid(out: &mut String, a: &Axes, f: &Frame) {
    let mut last_label = String::new();
    for i in 0..=4 {
        let fy = f.y0 + (f.y1 - f.y0) * i as f64 / 4.0;
        let y = f.py(fy);
        let label = (a.y_fmt)(fy);
        let shown = if label == last_label { String::new() } else { label.clone() };
        last_label = label;
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#e5e7eb"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            x2 = W - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            l = esc(&shown)
        );
    }
}

/// Header, a linear grid with five ticks per axis, axes.
fn open(out: &mut String, a: &Axes, f: &Frame) {
    header(out, a);
    y_grid(out, a, f);
    for i in 0..=4 {
        let fx = f.x0 + (f.x1 - f.x0) * i as f64 / 4.0;
        let x = f.px(fx);
        let _ = write!(out, r##"<text x="{x:.1}" y="{ty}" text-anchor="middle" font-size="11">{l}</text>"##, ty = H - BOTTOM + 16.0, l = esc(&(a.x_fmt)(fx)));
    }
    axes(out, a.x_label, a.y_label);
}

/// Legend entries in rows of three (more would run past the chart's right edge).
fn legend(out: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let x = LEFT + 10.0 + (i % 3) as f64 * 150.0;
        let row = (i / 3) as f64 * 14.0;
        let _ = write!(
            out,
            r##"<rect x="{x}" y="{y}" width="10" height="10" fill="{c}"/><text x="{tx}" y="{ty}" font-size="11">{n}</text>"##,
            y = TOP + 4.0 + row,
            c = COLORS[i % COLORS.len()],
            tx = x + 14.0,
            ty = TOP + 13.0 + row,
            n = esc(n)
        );
    }
}

/// A line per series, in the frame's coordinates (points that are not numbers are left out).
fn polylines(out: &mut String, f: &Frame, series: &[Series]) {
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<String> = s.points.iter().filter(|p| p.0.is_finite() && p.1.is_finite()).map(|p| format!("{:.1},{:.1}", f.px(p.0), f.py(p.1))).collect();
        let _ = write!(
            out,
            r##"<polyline class="series" data-name="{n}" fill="none" stroke="{c}" stroke-width="2" points="{p}"/>"##,
            n = esc(&s.name),
            c = COLORS[i % COLORS.len()],
            p = pts.join(" ")
        );
    }
}

/// A chart with nothing to draw says so (rather than axes ticked "0 B, 0 B, 1 B").
fn empty(out: &mut String, a: &Axes, why: &str) {
    header(out, a);
    let _ = write!(
        out,
        r##"<text class="empty" x="{cx}" y="{cy}" text-anchor="middle" font-size="13" fill="#6b7280">{w}</text></svg>"##,
        cx = W / 2.0,
        cy = H / 2.0,
        w = esc(why)
    );
}

/// A line chart over time (x: Unix seconds). Its time ticks carry their instant
/// (`data-epoch`): `static/console.js` writes them in the viewer's local time with the date;
/// without JavaScript they read in UTC. Ticks never repeat a label (a span of minutes shows
/// seconds). No sample yet: says so.
pub fn over_time(a: &Axes, series: &[Series]) -> String {
    let mut out = String::new();
    let all = || series.iter().flat_map(|s| s.points.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
    if all().next().is_none() {
        empty(&mut out, a, "no samples yet");
        return out;
    }
    let f = Frame::of(all().map(|p| p.0), all().map(|p| p.1), true);
    header(&mut out, a);
    y_grid(&mut out, a, &f);
    let span = f.x1 - f.x0;
    for i in 0..=4 {
        let t = f.x0 + span * i as f64 / 4.0;
        let anchor = match i {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            out,
            r##"<text class="time" data-epoch="{e}" data-span="{sp}" x="{x:.1}" y="{ty}" text-anchor="{anchor}" font-size="11">{l}</text>"##,
            e = t.round() as i64,
            sp = span.round() as i64,
            x = f.px(t),
            ty = H - BOTTOM + 16.0,
            l = esc(&utc_tick(t as i64, span, i == 0))
        );
    }
    axes(&mut out, &format!("{} (UTC)", a.x_label), a.y_label);
    polylines(&mut out, &f, series);
    if series.len() > 1 {
        legend(&mut out, &series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>());
    }
    out.push_str("</svg>");
    out
}

/// A time tick in UTC: seconds over a span of minutes, the date on the first tick.
fn utc_tick(unix: i64, span: f64, with_date: bool) -> String {
    let full = date_time(unix); // YYYY-MM-DD HH:MM:SS UTC
    let time = if span < 600.0 { &full[11..19] } else { &full[11..16] };
    if with_date {
        format!("{} {time}", &full[5..10])
    } else {
        time.to_string()
    }
}

/// A line chart; `markers` draw vertical lines (e.g. the optimal cache ratio).
pub fn line(a: &Axes, series: &[Series], markers: &[Marker]) -> String {
    let all = || series.iter().flat_map(|s| s.points.iter());
    if !all().any(|p| p.0.is_finite() && p.1.is_finite()) {
        let mut out = String::new();
        empty(&mut out, a, "no data yet");
        return out;
    }
    let f = Frame::of(all().map(|p| p.0).chain(markers.iter().map(|m| m.x)), all().map(|p| p.1), true);
    let mut out = String::new();
    open(&mut out, a, &f);
    polylines(&mut out, &f, series);
    for m in markers {
        let x = f.px(m.x);
        let _ = write!(
            out,
            r##"<line class="marker" x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{b}" stroke="#111" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{ty}" font-size="11">{l}</text>"##,
            b = H - BOTTOM,
            tx = x + 4.0,
            ty = TOP + 30.0,
            l = esc(&m.label)
        );
    }
    if series.len() > 1 {
        legend(&mut out, &series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>());
    }
    out.push_str("</svg>");
    out
}

/// The PC-vs-SC chart: one point per configuration and the balance line PC = SC (a
/// configuration on it uses its instances' CPU and memory alike; above it space decides the
/// cost, below it performance). Both axes are logarithmic: a tenant's PC and SC often differ
/// by orders of magnitude, and the balance line stays the diagonal. Points are named in a
/// legend (labels beside points would collide when configurations cost alike).
pub fn balance(a: &Axes, points: &[Point]) -> String {
    let finite: Vec<&Point> = points.iter().filter(|p| p.x.is_finite() && p.y.is_finite()).collect();
    let positive = finite.iter().flat_map(|p| [p.x, p.y]).filter(|v| *v > 0.0);
    let (lo, hi) = positive.fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    let (d0, d1) = if hi > 0.0 { (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0)) } else { (-3.0, 0.0) };
    let f = Frame { x0: d0, x1: d1, y0: d0, y1: d1 };
    let log = |v: f64| if v > 0.0 { v.log10().clamp(d0, d1) } else { d0 };
    let mut out = String::new();
    header(&mut out, a);
    let decades = (d1 - d0) as i32;
    for i in 0..=decades {
        let d = d0 + i as f64;
        let (x, y) = (f.px(d), f.py(d));
        let label = esc(&format!("1e{}", d as i32));
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#e5e7eb"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{label}</text>"##,
            x2 = W - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0
        );
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{b}" stroke="#e5e7eb"/><text x="{x:.1}" y="{ty}" text-anchor="middle" font-size="11">{label}</text>"##,
            b = H - BOTTOM,
            ty = H - BOTTOM + 16.0
        );
    }
    axes(&mut out, &format!("{} (log)", a.x_label), &format!("{} (log)", a.y_label));
    let _ = write!(
        out,
        r##"<line class="balance" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#9ca3af" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#6b7280" text-anchor="end">PC = SC</text>"##,
        f.px(d0),
        f.py(d0),
        f.px(d1),
        f.py(d1),
        f.px(d1) - 4.0,
        f.py(d1) + 14.0
    );
    for (i, p) in points.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let (lx, ly) = (LEFT + 12.0, TOP + 14.0 + i as f64 * 15.0);
        let star = if p.highlight { " ★" } else { "" };
        let _ = write!(
            out,
            r##"<circle cx="{lx}" cy="{ly}" r="4" fill="{color}"/><text x="{tx}" y="{ty}" font-size="11">{l}{star}</text>"##,
            tx = lx + 8.0,
            ty = ly + 4.0,
            l = esc(&p.label)
        );
        if !(p.x.is_finite() && p.y.is_finite()) {
            continue;
        }
        let (x, y) = (f.px(log(p.x)), f.py(log(p.y)));
        let r = if p.highlight { 7 } else { 5 };
        let _ = write!(
            out,
            r##"<circle class="point" cx="{x:.1}" cy="{y:.1}" r="{r}" fill="{color}" fill-opacity="0.85"><title>{l}: PC {px}, SC {py}</title></circle>"##,
            l = esc(&p.label),
            px = number(p.x),
            py = number(p.y)
        );
    }
    out.push_str("</svg>");
    out
}

/// A share as a percentage; under 10% with a decimal, so that 0.4% does not read 0% beside a
/// curve that is not at 0.
pub fn ratio(v: f64) -> String {
    let p = v * 100.0;
    if p != 0.0 && p.abs() < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

pub fn bytes(v: f64) -> String {
    crate::views::human_bytes(v)
}

/// Microseconds for a person: "850 µs", "1.2 ms", "3.4 s".
pub fn micros(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1} s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} ms", v / 1e3)
    } else {
        format!("{v:.0} µs")
    }
}

pub fn number(v: f64) -> String {
    if v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-2) {
        format!("{v:.2e}")
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC` (days to a civil date: Howard Hinnant's
/// algorithm; a date crate for this one line of the pages would be more than it needs).
pub fn date_time(unix: i64) -> String {
    let (days, secs) = (unix.div_euclid(86400), unix.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// Unix seconds as a time of day (the x format of charts over time, which write their ticks
/// themselves: `over_time`).
pub fn clock(v: f64) -> String {
    utc_tick(v as i64, 86_400.0, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axes(id: &'static str) -> Axes<'static> {
        Axes { id, title: "T <&>", x_label: "x", y_label: "y", x_fmt: ratio, y_fmt: number }
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(date_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(date_time(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(date_time(1_796_257_969), "2026-12-03 00:32:49 UTC");
    }

    #[test]
    fn line_chart_draws_every_series_and_marker() {
        let s = vec![Series { name: "mrc".into(), points: vec![(0.0, 1.0), (0.5, 0.3), (1.0, 0.0)] }];
        let svg = line(&axes("mrc-chart"), &s, &[Marker { x: 0.5, label: "optimal 50%".into() }]);
        assert!(svg.starts_with("<svg id=\"mrc-chart\"") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("class=\"marker\"").count(), 1);
        assert!(svg.contains("T &lt;&amp;&gt;"), "titles are escaped");
        assert!(!svg.contains("NaN"));
        // Degenerate input (one point, no points) still draws a frame without NaN.
        let svg = line(&axes("e"), &[Series { name: "x".into(), points: vec![(1.0, 1.0)] }], &[]);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert!(!line(&axes("e"), &[], &[]).contains("NaN"));
    }

    /// The texts of the chart's `<text …>…</text>` elements of class `class` (or all).
    fn texts(svg: &str, class: Option<&str>) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter(|t| class.is_none_or(|c| t.contains(&format!("class=\"{c}\""))))
            .map(|t| t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()].to_string())
            .collect()
    }

    #[test]
    fn charts_over_time_say_so_when_empty_and_repeat_no_tick() {
        // Nothing sampled: a sentence, not axes ticked "0 B, 0 B, 1 B".
        let empty = over_time(&Axes { y_fmt: bytes, ..axes("usage-chart") }, &[Series { name: "bytes".into(), points: vec![] }]);
        assert!(empty.contains("no samples yet") && !empty.contains("<polyline"), "{empty}");
        // A minute of samples of nearly the same bytes: five distinct times (with seconds), the
        // first with its date, and no value label written twice.
        let t0 = 1_796_000_000.0;
        let pts: Vec<(f64, f64)> = (0..7).map(|i| (t0 + 10.0 * i as f64, 1000.0 + (i % 2) as f64)).collect();
        let svg = over_time(&Axes { y_fmt: bytes, ..axes("c") }, &[Series { name: "bytes".into(), points: pts }]);
        let ticks = texts(&svg, Some("time"));
        assert_eq!(ticks.len(), 5, "{svg}");
        assert!(ticks[0].contains('-') && ticks[1..].iter().all(|t| t.len() == 8), "the date once, then HH:MM:SS: {ticks:?}");
        let mut distinct = ticks.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 5, "{ticks:?}");
        assert!(svg.contains("data-epoch=\"1796000000\""), "ticks carry their instant for the viewer's time zone");
        let values: Vec<String> = texts(&svg, None).into_iter().filter(|t| t.ends_with(" B") || t.ends_with("KiB")).collect();
        let mut unique = values.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), values.len(), "no value label twice: {values:?}");
        // A share stays within 100%.
        let share = over_time(&Axes { y_fmt: ratio, ..axes("h") }, &[Series { name: "hit".into(), points: vec![(t0, 1.0), (t0 + 10.0, 1.0)] }]);
        assert!(texts(&share, None).iter().any(|t| t == "100%") && !share.contains("105%"), "{share}");
        assert_eq!(ratio(0.004), "0.4%");
    }

    #[test]
    fn balance_chart_has_the_diagonal_and_points() {
        let pts = vec![Point { x: 1.0, y: 2.0, label: "raw".into(), highlight: false }, Point { x: 0.5, y: f64::NAN, label: "bad".into(), highlight: true }];
        let svg = balance(&axes("pcsc-chart"), &pts);
        assert_eq!(svg.matches("class=\"point\"").count(), 1, "non-finite points are left out");
        assert!(svg.contains("class=\"balance\""));
    }
}
