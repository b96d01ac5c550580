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

/// A name column is at most this wide: a longer name overflows its own
/// row rather than widening every row (a 70,000-character op name made a
/// width the formatter refuses, and crashed `report` and `compare`).
pub const NAME_COLUMN_MAX: usize = 64;

/// Names an error lists (the layers or ops a profile has, when a user
/// asked for another): at most 20, each cut to [`NAME_COLUMN_MAX`]
/// characters and escaped, so that the one line stays one readable line
/// whatever the profile holds.
pub fn name_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 20;
    let names: Vec<&str> = names.into_iter().collect();
    let mut out: Vec<String> = names
        .iter()
        .take(SHOWN)
        .map(|n| {
            let mut s: String = n.chars().take(NAME_COLUMN_MAX).collect();
            if s.len() < n.len() {
                s.push_str("...");
            }
            fsprof_core::printable::field(&s).into_owned()
        })
        .collect();
    if names.len() > SHOWN {
        out.push(format!("and {} more", names.len() - SHOWN));
    }
    out.join(", ")
}

/// The width of a column of `names` (and its two-letter heading), in
/// characters, at most [`NAME_COLUMN_MAX`].
pub fn name_column<'a>(names: impl IntoIterator<Item = &'a str>) -> usize {
    names
        .into_iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(2)
        .clamp(2, NAME_COLUMN_MAX)
}

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
    fn name_columns_fit_their_names_up_to_a_limit() {
        assert_eq!(name_column(["read", "fsync"]), 5);
        assert_eq!(name_column([]), 2);
        assert_eq!(name_column(["é"]), 2);
        assert_eq!(name_column(["ééé"]), 3, "characters, not bytes");
        let long = "x".repeat(70_000);
        assert_eq!(name_column(["read", long.as_str()]), NAME_COLUMN_MAX);
    }

    #[test]
    fn name_lists_stay_one_short_line() {
        assert_eq!(name_list(["read", "write"]), "read, write");
        let long = "x".repeat(70_000);
        let listed = name_list([long.as_str(), "a\nb"]);
        assert_eq!(
            listed,
            format!("{}..., a\\x0ab", "x".repeat(NAME_COLUMN_MAX))
        );
        let many: Vec<String> = (0..25).map(|k| format!("op{k}")).collect();
        assert!(name_list(many.iter().map(String::as_str)).ends_with("op19, and 5 more"));
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
