//! Durations and sizes as people write them on a command line or in a
//! config file: `7d`, `12h`, `90m`, `30s` (or plain seconds), and `10GiB`,
//! `500MB`, `64KiB` (or plain bytes). Decimal (`KB`, `MB`, ...) and binary
//! (`KiB`, `MiB`, ...) units are both accepted and mean what they say.

/// Seconds in `text` (`7d`, `12h`, `90m`, `30s`, `3600`).
pub fn parse_duration_s(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = split_number(t);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 7d, 12h, 90m, 30s or 3600"))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => {
            return Err(format!(
                "{text:?}: unknown duration unit {unit:?} (s, m, h, d or w)"
            ))
        }
    };
    n.checked_mul(scale)
        .filter(|&s| s > 0)
        .ok_or_else(|| format!("{text:?} must be a positive duration that fits in a u64"))
}

/// Bytes in `text` (`10GiB`, `500MB`, `4096`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = split_number(t);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size like 10GiB, 500MB or 4096"))?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "{text:?}: unknown size unit {unit:?} (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)"
            ))
        }
    };
    n.checked_mul(scale)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("{text:?} must be a positive size that fits in a u64"))
}

fn split_number(t: &str) -> (&str, &str) {
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    (&t[..end], t[end..].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_s("7d"), Ok(604_800));
        assert_eq!(parse_duration_s("12h"), Ok(43_200));
        assert_eq!(parse_duration_s("90m"), Ok(5_400));
        assert_eq!(parse_duration_s("30s"), Ok(30));
        assert_eq!(parse_duration_s("3600"), Ok(3_600));
        assert_eq!(parse_duration_s("2w"), Ok(1_209_600));
        for bad in ["", "d", "7y", "-1d", "0", "1.5h", "99999999999999999999d"] {
            assert!(parse_duration_s(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("10GiB"), Ok(10 << 30));
        assert_eq!(parse_bytes("500MB"), Ok(500_000_000));
        assert_eq!(parse_bytes("64KiB"), Ok(65_536));
        assert_eq!(parse_bytes("4096"), Ok(4_096));
        assert_eq!(parse_bytes("1 gib"), Ok(1 << 30));
        for bad in ["", "GiB", "10XB", "0", "-5", "20000000TiB"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
    }
}
