//! Edits that turn a well-formed input into a damaged or hostile one:
//! bit flips and byte changes (a corrupt disk, a torn write), integers of
//! every width set to their edge values (a length field that lies),
//! truncation, removal, duplication, splices from another seed, runs of
//! one byte up to 100,000 long (a 70,000-character op name) and the
//! target's own tokens (JSON keys, strace syntax, huge decimal numbers).
//!
//! Positions are fractions of the input's length, so an edit stays
//! meaningful while proptest shrinks the edits before it.

use proptest::prelude::*;

/// Integers that break arithmetic and length checks.
pub const EDGE_VALUES: &[u64] = &[
    0,
    1,
    2,
    7,
    8,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 20,
    1 << 30,
    1 << 31,
    i64::MAX as u64,
    i64::MIN as u64,
    u64::MAX,
    u64::MAX - 1,
];

/// Numbers as text: overflow every integer type, and floats that are not
/// numbers.
pub const EDGE_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "255",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "1e308",
    "1e309",
    "-1e308",
    "5e-324",
    "0.000000001",
    "1.5",
    "NaN",
];

#[derive(Clone, Debug)]
pub enum Edit {
    /// Flips one bit.
    Flip {
        at: u32,
        bit: u8,
    },
    /// Sets one byte.
    Byte {
        at: u32,
        value: u8,
    },
    /// Writes an edge value as an integer of `width` bytes (1, 2, 4, 8).
    Word {
        at: u32,
        width: u8,
        value: usize,
        big_endian: bool,
    },
    /// Writes an edge value as a LEB128 varint (the trace codec's).
    Varint {
        at: u32,
        value: usize,
    },
    /// Ends the input here.
    Cut {
        at: u32,
    },
    Remove {
        at: u32,
        len: u16,
    },
    Insert {
        at: u32,
        bytes: Vec<u8>,
    },
    /// `count` copies of `byte`.
    Run {
        at: u32,
        byte: u8,
        count: u32,
    },
    /// A target token or an edge number, inserted or over the bytes there.
    Token {
        at: u32,
        token: usize,
        replace: bool,
    },
    /// Copies a stretch of the input elsewhere in it.
    Copy {
        from: u32,
        len: u16,
        to: u32,
    },
    /// Inserts a stretch of another seed.
    Splice {
        seed: usize,
        from: u32,
        len: u16,
        to: u32,
    },
}

/// A position in `0..=len` from a fraction of `u32::MAX`.
fn pos(at: u32, len: usize) -> usize {
    ((at as u64 * (len as u64 + 1)) >> 32) as usize
}

pub fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<u32>();
    prop_oneof![
        3 => (at, 0u8..8).prop_map(|(at, bit)| Edit::Flip { at, bit }),
        2 => (at, any::<u8>()).prop_map(|(at, value)| Edit::Byte { at, value }),
        3 => (at, prop::sample::select(vec![1u8, 2, 4, 8]), 0..EDGE_VALUES.len(), any::<bool>())
            .prop_map(|(at, width, value, big_endian)| Edit::Word { at, width, value, big_endian }),
        2 => (at, 0..EDGE_VALUES.len()).prop_map(|(at, value)| Edit::Varint { at, value }),
        1 => at.prop_map(|at| Edit::Cut { at }),
        1 => (at, 1u16..64).prop_map(|(at, len)| Edit::Remove { at, len }),
        1 => (at, prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        1 => (at, prop::sample::select(b"a\0\"\\,\n<(%\xff".to_vec()),
            prop_oneof![1u32..300, 60_000u32..100_000])
            .prop_map(|(at, byte, count)| Edit::Run { at, byte, count }),
        4 => (at, any::<usize>(), any::<bool>())
            .prop_map(|(at, token, replace)| Edit::Token { at, token, replace }),
        1 => (at, 1u16..512, any::<u32>()).prop_map(|(from, len, to)| Edit::Copy { from, len, to }),
        1 => (any::<usize>(), at, 1u16..512, any::<u32>())
            .prop_map(|(seed, from, len, to)| Edit::Splice { seed, from, len, to }),
    ]
}

/// Applies `edits` to `input` in order. `tokens` are the target's own;
/// `seeds` are spliced from.
pub fn apply(input: &mut Vec<u8>, edits: &[Edit], tokens: &[&[u8]], seeds: &[Vec<u8>]) {
    for e in edits {
        apply_one(input, e, tokens, seeds);
    }
}

fn apply_one(b: &mut Vec<u8>, e: &Edit, tokens: &[&[u8]], seeds: &[Vec<u8>]) {
    let n = b.len();
    match *e {
        Edit::Flip { at, bit } if n > 0 => {
            let i = pos(at, n - 1);
            b[i] ^= 1 << bit;
        }
        Edit::Byte { at, value } if n > 0 => {
            let i = pos(at, n - 1);
            b[i] = value;
        }
        Edit::Word {
            at,
            width,
            value,
            big_endian,
        } => {
            let v = EDGE_VALUES[value % EDGE_VALUES.len()];
            let w = width as usize;
            let bytes = if big_endian {
                v.to_be_bytes()[8 - w..].to_vec()
            } else {
                v.to_le_bytes()[..w].to_vec()
            };
            overwrite(b, pos(at, n), &bytes);
        }
        Edit::Varint { at, value } => {
            let mut v = EDGE_VALUES[value % EDGE_VALUES.len()];
            let mut bytes = Vec::new();
            while v >= 0x80 {
                bytes.push(v as u8 | 0x80);
                v >>= 7;
            }
            bytes.push(v as u8);
            overwrite(b, pos(at, n), &bytes);
        }
        Edit::Cut { at } => b.truncate(pos(at, n)),
        Edit::Remove { at, len } => {
            let i = pos(at, n);
            b.drain(i..(i + len as usize).min(n));
        }
        Edit::Insert { at, ref bytes } => {
            let i = pos(at, n);
            b.splice(i..i, bytes.iter().copied());
        }
        Edit::Run { at, byte, count } => {
            let i = pos(at, n);
            b.splice(i..i, std::iter::repeat_n(byte, count as usize));
        }
        Edit::Token { at, token, replace } => {
            let k = token % (tokens.len() + EDGE_NUMBERS.len());
            let t = tokens
                .get(k)
                .copied()
                .unwrap_or_else(|| EDGE_NUMBERS[k - tokens.len()].as_bytes());
            let i = pos(at, n);
            if replace {
                overwrite(b, i, t);
            } else {
                b.splice(i..i, t.iter().copied());
            }
        }
        Edit::Copy { from, len, to } if n > 0 => {
            let i = pos(from, n - 1);
            let piece = b[i..(i + len as usize).min(n)].to_vec();
            let j = pos(to, n);
            b.splice(j..j, piece);
        }
        Edit::Splice {
            seed,
            from,
            len,
            to,
        } if !seeds.is_empty() => {
            let s = &seeds[seed % seeds.len()];
            if s.is_empty() {
                return;
            }
            let i = pos(from, s.len() - 1);
            let j = pos(to, n);
            b.splice(j..j, s[i..(i + len as usize).min(s.len())].iter().copied());
        }
        _ => {}
    }
}

/// Writes `bytes` at `i`, growing the input if they run past its end.
fn overwrite(b: &mut Vec<u8>, i: usize, bytes: &[u8]) {
    let end = i + bytes.len();
    if end > b.len() {
        b.resize(end, 0);
    }
    b[i..end].copy_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_stay_inside_the_input() {
        assert_eq!(pos(0, 10), 0);
        assert_eq!(pos(u32::MAX, 10), 10);
        assert_eq!(pos(u32::MAX, 0), 0);
    }

    #[test]
    fn edits_do_what_they_say() {
        let mut b = b"abcdef".to_vec();
        apply(
            &mut b,
            &[
                Edit::Cut { at: u32::MAX / 2 },
                Edit::Run {
                    at: u32::MAX,
                    byte: b'z',
                    count: 3,
                },
                Edit::Token {
                    at: 0,
                    token: 0,
                    replace: false,
                },
            ],
            &[b"<"],
            &[],
        );
        assert_eq!(b, b"<abczzz");
        let mut b = vec![0u8; 4];
        apply(
            &mut b,
            &[Edit::Word {
                at: 0,
                width: 4,
                value: EDGE_VALUES.iter().position(|&v| v == u64::MAX).unwrap(),
                big_endian: false,
            }],
            &[],
            &[],
        );
        assert_eq!(b, [0xff; 4]);
    }
}
