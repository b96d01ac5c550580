//! Human units: parsing `--interval 500ms` and `--size 64M`; printing durations (`4.20ms`),
//! byte counts (`4 KiB`) and times of day. Every renderer uses these, so a
//! number reads the same in every report.

/// Parses `1s`, `250ms`, `10us`/`10µs`, `100ns`, `2m`, `1.5s`; a bare number
/// is seconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        format!("invalid duration {s:?}: expected a number with a unit, e.g. 1s or 250ms")
    })?;
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        u => {
            return Err(format!(
                "invalid duration {s:?}: unknown unit {u:?} (use ns, us, ms, s, m, h)"
            ))
        }
    };
    let ns = value * scale;
    if !(ns >= 1.0 && ns < u64::MAX as f64) {
        return Err(format!("invalid duration {s:?}: must be at least 1ns"));
    }
    Ok(ns.round() as u64)
}

/// Parses `4096`, `4k`/`4K`/`4KiB`, `64M`, `2G`, `1T`: binary multiples.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("invalid size {s:?}: expected a number with an optional unit, e.g. 4096, 4k or 64M")
    })?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        u => {
            return Err(format!(
                "invalid size {s:?}: unknown unit {u:?} (use K, M, G or T)"
            ))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("invalid size {s:?}: too large"))
}

/// `1.23 µs`-style rendering with three significant digits.
pub fn format_ns(ns: f64) -> String {
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if v >= 100.0 || v == v.trunc() && v < 1000.0 && unit == "ns" {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{unit}")
}

/// `4 KiB`, `16 MiB`, `1.5 KiB`, `512 B`: binary units, a whole number
/// when within 0.05 of one, else one decimal.
pub fn format_bytes(b: f64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if (v - v.round()).abs() < 0.05 {
        format!("{} {}", v.round(), UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration_ns("1s").unwrap(), 1_000_000_000);
        assert_eq!(parse_duration_ns("250ms").unwrap(), 250_000_000);
        assert_eq!(parse_duration_ns("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_duration_ns("10us").unwrap(), 10_000);
        assert_eq!(parse_duration_ns("2").unwrap(), 2_000_000_000);
        assert!(parse_duration_ns("fast").is_err());
        assert!(parse_duration_ns("1 fortnight").is_err());
        assert!(parse_duration_ns("0s").is_err());
    }

    #[test]
    fn sizes_parse_as_binary_multiples() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("1M"), Ok(1 << 20));
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("1T"), Ok(1 << 40));
        for bad in ["1x", "4X", "", "99999999999T", "99999999999999G"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_three_digits() {
        let cases = [(512.0, "512ns"), (4200.0, "4.20µs"), (42_000.0, "42.0µs")];
        for (ns, s) in cases
            .into_iter()
            .chain([(4_200_000.0, "4.20ms"), (1.5e9, "1.50s")])
        {
            assert_eq!(format_ns(ns), s);
        }
    }

    #[test]
    fn byte_units() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        let cases = [
            (0.0, "0 B"),
            (512.0, "512 B"),
            (4096.0, "4 KiB"),
            (65536.0, "64 KiB"),
        ];
        let more = [
            (1536.0, "1.5 KiB"),
            (1048576.0, "1 MiB"),
            (1.5 * gib, "1.5 GiB"),
        ];
        for (b, s) in cases.into_iter().chain(more) {
            assert_eq!(format_bytes(b), s);
        }
    }
}

/// `2026-11-21T23:59:07.123Z` for a Unix time in ns.
pub fn rfc3339_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let millis = (unix_ns / 1_000_000) % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod time_tests {
    #[test]
    fn rfc3339() {
        assert_eq!(super::rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::rfc3339_utc(1_795_305_547_123_000_000),
            "2026-11-21T23:59:07.123Z"
        );
        assert_eq!(
            super::rfc3339_utc(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000Z"
        );
    }
}
