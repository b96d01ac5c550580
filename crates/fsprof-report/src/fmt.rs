//! The number and field formats every rendering shares, so a figure reads
//! the same in the text report, the CSV and the HTML page. Durations and
//! byte counts are [`fsprof_core::units`].

/// 1234567 -> "1,234,567".
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

pub use fsprof_core::printable::csv_field as field;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        for (n, s) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1234567, "1,234,567"),
        ] {
            assert_eq!(group(n), s);
        }
    }

    #[test]
    fn quotes_fields_that_need_it() {
        let cases = [
            ("read", "read"),
            ("a,b", "\"a,b\""),
            ("two\nlines", "\"two\nlines\""),
        ];
        for (f, s) in cases
            .into_iter()
            .chain([("say \"hi\"", "\"say \"\"hi\"\"\"")])
        {
            assert_eq!(field(f), s);
        }
    }
}
