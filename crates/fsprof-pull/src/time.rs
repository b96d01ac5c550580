//! `--from` and `--to`: a moment as Prometheus' API takes it (Unix
//! seconds), from what a person types.

/// Parses `now`, `now-1h` / `-1h` (before now), Unix seconds (`1700000000`
/// or with a fraction), or RFC 3339 (`2026-11-28T10:00:00Z`).
pub fn parse(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    if t == "now" {
        return Ok(now);
    }
    if let Some(ago) = t.strip_prefix("now-").or_else(|| t.strip_prefix('-')) {
        let d = humantime::parse_duration(ago).map_err(|e| bad(s, &e.to_string()))?;
        return Ok(now - d.as_secs_f64());
    }
    if let Ok(v) = t.parse::<f64>() {
        if v.is_finite() && v >= 0.0 {
            return Ok(v);
        }
    }
    let at = humantime::parse_rfc3339_weak(t).map_err(|e| bad(s, &e.to_string()))?;
    Ok(at
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| bad(s, "before 1970"))?
        .as_secs_f64())
}

fn bad(s: &str, why: &str) -> String {
    format!("time {s:?}: {why} (give now, now-1h, -30m, Unix seconds or 2026-11-28T10:00:00Z)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_in_every_spelling() {
        let now = 1_800_000_000.0;
        assert_eq!(parse("now", now), Ok(now));
        assert_eq!(parse("now-1h", now), Ok(now - 3600.0));
        assert_eq!(parse("-30m", now), Ok(now - 1800.0));
        assert_eq!(parse("1700000000.5", now), Ok(1_700_000_000.5));
        assert_eq!(parse("2023-11-14T22:13:20Z", now), Ok(1_700_000_000.0));
        assert!(parse("yesterday", now).unwrap_err().contains("give now"));
        assert!(parse("-soon", now).is_err());
    }
}
