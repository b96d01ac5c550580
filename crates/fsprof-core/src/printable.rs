//! Text from a profile made safe to print on a terminal. A profile is
//! shared data: its command line, host name, process names and notes come
//! from whoever made it, and an escape sequence in them (`\x1b]0;...`, a
//! cursor move, a bidi override) would act on the reader's terminal. Every
//! text renderer passes such strings through [`field`] (one line: every
//! control character shown as an escape) or its whole output through
//! [`text`] (line breaks kept).

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` must not reach a terminal as it is: C0 and C1 controls,
/// DEL, and the Unicode format characters that reorder or hide text.
fn unsafe_char(c: char, keep_newline: bool) -> bool {
    match c {
        '\n' => !keep_newline,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        // bidi embeddings, overrides and isolates; marks; zero-width and
        // invisible format characters
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' => true,
        '\u{feff}' => true,
        _ => false,
    }
}

fn escape(s: &str, keep_newline: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| unsafe_char(c, keep_newline)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !unsafe_char(c, keep_newline) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// One field (a command line word, a host name, a note) for one line of
/// text: every control character, line breaks included, as an escape.
pub fn field(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// A CSV field, quoted as RFC 4180 says when it holds a comma, a quote or
/// a line break: the one CSV quoting of every CSV fsprof writes (reports,
/// `trace show`).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A whole rendered text: line breaks kept, every other control character
/// as an escape.
pub fn text(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_become_visible_escapes() {
        assert_eq!(field("plain µs ✓"), "plain µs ✓");
        assert_eq!(field("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
        assert_eq!(field("a\nb\tc\r"), "a\\x0ab\\x09c\\x0d");
        assert_eq!(field("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(field("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(text("line 1\nline\x1b[2J 2\n"), "line 1\nline\\x1b[2J 2\n");
    }

    proptest::proptest! {
        /// Whatever the input, the output holds no control character but
        /// the line breaks `text` keeps.
        #[test]
        fn nothing_unsafe_gets_through(s in "\\PC*|[\\x00-\\x1f\\x7f-\\u{9f}\\u{202a}-\\u{202e}a-z]*") {
            proptest::prop_assert!(!field(&s).chars().any(|c| unsafe_char(c, false)));
            proptest::prop_assert!(!text(&s).chars().any(|c| unsafe_char(c, true)));
        }
    }
}
