//! Numbers in command arguments, read as Redis reads them (shared by the engine's commands and
//! its RDB codec).

/// Parses a double as Redis's `string2d`/`strtold` do: decimal or exponent forms, `inf`,
/// `+inf`, `-inf`; no NaN, no surrounding spaces.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            if lower.contains("inf") || lower.contains("nan") {
                return None;
            }
            s.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}
