//! Kubernetes quantities (`500m`, `64Gi`, `1e3`): parsing to numbers and printing back.
//!
//! Parsing follows `k8s.io/apimachinery/pkg/api/resource`: an optional sign, a decimal
//! number (with an optional exponent `e`/`E`), then an optional suffix — binary
//! (`Ki Mi Gi Ti Pi Ei`) or decimal (`n u m k M G T P E`).

use thiserror::Error;

/// A quantity string that is not a valid Kubernetes quantity.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    /// The text that failed to parse.
    pub input: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

/// Parses a quantity into its value in base units (`500m` → 0.5, `1Ki` → 1024).
pub fn parse(input: &str) -> Result<f64, QuantityError> {
    if let Some(v) = parse_simple(input) {
        return Ok(v);
    }
    let err = |reason| QuantityError { input: input.to_string(), reason };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty quantity"));
    }
    let bytes = s.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let digits_start = end;
    while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
        end += 1;
    }
    if end == digits_start {
        return Err(err("expected a number"));
    }
    // An exponent (`1e3`, `2E-2`) is part of the number, unless the `E` is the exa suffix.
    let mut number_end = end;
    if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let mut j = end + 1;
        if j < bytes.len() && matches!(bytes[j], b'+' | b'-') {
            j += 1;
        }
        let exp_digits = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_digits && j == bytes.len() {
            number_end = j;
        }
    }
    let number: f64 = s[..number_end].parse().map_err(|_| err("malformed number"))?;
    let multiplier = match &s[number_end..] {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        "Pi" => 1024.0f64.powi(5),
        "Ei" => 1024.0f64.powi(6),
        _ => return Err(err("unknown suffix")),
    };
    let value = number * multiplier;
    if !value.is_finite() {
        return Err(err("value out of range"));
    }
    Ok(value)
}

/// The common shapes — digits, optionally followed by `m`, `Ki`, `Mi`, `Gi` or `Ti` —
/// without going through float parsing.
fn parse_simple(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 15 {
        return None;
    }
    let mut n: u64 = 0;
    for c in &b[..digits] {
        n = n * 10 + u64::from(c - b'0');
    }
    let n = n as f64;
    match &s[digits..] {
        "" => Some(n),
        "m" => Some(n / 1000.0),
        "Ki" => Some(n * 1024.0),
        "Mi" => Some(n * 1024.0 * 1024.0),
        "Gi" => Some(n * 1024.0 * 1024.0 * 1024.0),
        "Ti" => Some(n * 1024.0f64.powi(4)),
        _ => None,
    }
}

/// Parses a quantity and returns its value in milli-units, rounded up as `MilliValue()` does.
pub fn parse_milli(input: &str) -> Result<f64, QuantityError> {
    parse(input).map(|v| round_up(v * 1000.0))
}

/// Parses a quantity and returns its integral value, rounded up as `Value()` does.
pub fn parse_value(input: &str) -> Result<f64, QuantityError> {
    parse(input).map(round_up)
}

fn round_up(v: f64) -> f64 {
    // Guard against binary noise (`0.1 * 1000` = 100.00000000000001).
    let r = v.round();
    if (v - r).abs() < 1e-6 {
        r
    } else {
        v.ceil()
    }
}

/// Prints a value held in milli-units (`1500` → `1500m`, `2000` → `2`).
pub fn format_milli(milli: f64) -> String {
    let m = milli.round() as i64;
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}

/// Prints a byte count with the largest binary suffix that divides it (`68719476736` → `64Gi`).
pub fn format_bytes(bytes: f64) -> String {
    let b = bytes.round() as i64;
    if b == 0 {
        return "0".to_string();
    }
    for (suffix, unit) in [("Ti", 1i64 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if b % unit == 0 {
            return format!("{}{suffix}", b / unit);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes_and_exponents() {
        assert_eq!(parse("500m").unwrap(), 0.5);
        assert_eq!(parse("2").unwrap(), 2.0);
        assert_eq!(parse("64Gi").unwrap(), 64.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(parse("1k").unwrap(), 1000.0);
        assert_eq!(parse("1e3").unwrap(), 1000.0);
        assert_eq!(parse("1E").unwrap(), 1e18);
        assert_eq!(parse("2.5Gi").unwrap(), 2.5 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(parse_milli("0.1").unwrap(), 100.0);
        assert_eq!(parse_milli("1").unwrap(), 1000.0);
        assert_eq!(parse_value("1.5").unwrap(), 2.0);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("").is_err());
        assert!(parse("abc").is_err());
        assert!(parse("1GB").is_err());
        assert!(parse("1.2.3").is_err());
    }

    #[test]
    fn formats_back() {
        assert_eq!(format_milli(1500.0), "1500m");
        assert_eq!(format_milli(2000.0), "2");
        assert_eq!(format_bytes(64.0 * 1024.0 * 1024.0 * 1024.0), "64Gi");
        assert_eq!(format_bytes(1000.0), "1000");
        assert_eq!(format_bytes(0.0), "0");
    }
}
