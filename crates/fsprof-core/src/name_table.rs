//! Tables of names without a pointer per name, for the static-PIE
//! `fsprof` binary's start-up.
//!
//! A `&[&str]` (or a table of tuples holding `&str`) that code indexes at
//! run time is a static of pointers: fsprof, linked as a static PIE,
//! writes every one of them at every start (one relative relocation each)
//! into the pages of its RELRO segment, and each page it writes costs a
//! private copy (`crates/fsprof-cli/src/entry.rs`), ~2–3 µs a page in the
//! VMs fsprof is measured on, whether or not the run ever reads a name. A
//! [`NameTable`] keeps the same names as one byte string and their end
//! offsets: read-only data with no relocation, paged in only by a lookup.
//! The list it is built from stays a `const`, used at compile time only,
//! so it leaves nothing in the binary.
//!
//! By hand because it is ten lines of `const fn` that no crate offers in
//! this shape (a `static` built at compile time from a `&[&str]` const).

/// `names.len()` names, `BYTES` bytes of them in all, one after another.
#[derive(Debug)]
pub struct NameTable<const BYTES: usize, const N: usize> {
    bytes: [u8; BYTES],
    /// Where each name ends in `bytes` (and the next begins).
    ends: [u16; N],
}

/// The bytes of all `names`: a [`NameTable`]'s `BYTES`.
pub const fn total_len(names: &[&str]) -> usize {
    let mut sum = 0;
    let mut i = 0;
    while i < names.len() {
        sum += names[i].len();
        i += 1;
    }
    sum
}

/// The second of each pair, at compile time: the names of a `(number,
/// name)` table, for [`NameTable::new`].
pub const fn seconds<const N: usize>(pairs: &[(u32, &'static str)]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = pairs[i].1;
        i += 1;
    }
    out
}

/// The first of each pair, at compile time: the numbers of a `(number,
/// name)` table, index for index with [`seconds`].
pub const fn firsts<const N: usize>(pairs: &[(u32, &str)]) -> [u32; N] {
    let mut out = [0; N];
    let mut i = 0;
    while i < N {
        out[i] = pairs[i].0;
        i += 1;
    }
    out
}

impl<const BYTES: usize, const N: usize> NameTable<BYTES, N> {
    /// Packs `names` (compile time: a mismatch with `BYTES`/`N` or more
    /// than 64 KiB of names fails the build).
    pub const fn new(names: &[&str]) -> Self {
        assert!(names.len() == N && total_len(names) == BYTES && BYTES <= u16::MAX as usize);
        let mut bytes = [0u8; BYTES];
        let mut ends = [0u16; N];
        let mut at = 0;
        let mut i = 0;
        while i < N {
            let s = names[i].as_bytes();
            let mut k = 0;
            while k < s.len() {
                bytes[at] = s[k];
                at += 1;
                k += 1;
            }
            ends[i] = at as u16;
            i += 1;
        }
        NameTable { bytes, ends }
    }

    pub const fn len(&self) -> usize {
        N
    }

    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    /// Name `i`, as it was in the list.
    pub fn get(&self, i: usize) -> Option<&str> {
        // Whole names, cut where one `&str` ended: always UTF-8.
        std::str::from_utf8(self.bytes_of(i)?).ok()
    }

    fn bytes_of(&self, i: usize) -> Option<&[u8]> {
        let end = usize::from(*self.ends.get(i)?);
        let start = match i.checked_sub(1) {
            Some(before) => usize::from(*self.ends.get(before)?),
            None => 0,
        };
        self.bytes.get(start..end)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..N).filter_map(|i| self.get(i))
    }

    /// Where `name` is in the list: its bytes compared, no name checked
    /// for UTF-8 on the way (strace's import asks once a line).
    pub fn position(&self, name: &str) -> Option<usize> {
        (0..N).position(|i| self.bytes_of(i) == Some(name.as_bytes()))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }
}

/// `name_table! { /// doc  pub static NAME = LIST; }`: a [`NameTable`]
/// static of the `&[&str]` const `LIST`; `name_table! { static (NUMBERS,
/// NAMES) = PAIRS; }`: the numbers of the `&[(u32, &str)]` const `PAIRS`
/// and a [`NameTable`] of its names.
#[macro_export]
macro_rules! name_table {
    ($(#[$m:meta])* $vis:vis static $name:ident = $list:expr;) => {
        $(#[$m])*
        $vis static $name: $crate::name_table::NameTable<
            { $crate::name_table::total_len($list) },
            { $list.len() },
        > = $crate::name_table::NameTable::new($list);
    };
    // A `(number, name)` table: its numbers, and its names packed, index
    // for index.
    ($(#[$m:meta])* $vis:vis static ($nums:ident, $names:ident) = $pairs:expr;) => {
        $vis static $nums: [u32; $pairs.len()] = $crate::name_table::firsts($pairs);
        $crate::name_table! {
            $(#[$m])*
            $vis static $names = &$crate::name_table::seconds::<{ $pairs.len() }>($pairs);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &[&str] = &["read", "", "pwritev2", "é"];
    crate::name_table! { static T = LIST; }

    #[test]
    fn every_name_comes_back_as_it_was() {
        assert_eq!(T.len(), LIST.len());
        assert_eq!(T.iter().collect::<Vec<_>>(), LIST);
        assert_eq!(T.get(2), Some("pwritev2"));
        assert_eq!(T.get(4), None);
        assert_eq!(T.position("é"), Some(3));
        assert_eq!(T.position(""), Some(1));
        assert!(!T.contains("write"));
    }

    #[test]
    fn pairs_split_index_for_index() {
        const PAIRS: &[(u32, &str)] = &[(0, "read"), (17, "pread64")];
        const NAMES: [&str; 2] = seconds(PAIRS);
        assert_eq!(NAMES, ["read", "pread64"]);
        assert_eq!(firsts::<2>(PAIRS), [0, 17]);
    }
}
