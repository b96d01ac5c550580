//! What of an arena block its process may have written, so that fsprof
//! zeroes that, not the whole block, before offering it again.
//!
//! A block used to be given back by writing zeros over every byte its pool
//! had handed out (`used`: about 80 KiB for a `cat`, mostly two 26 KiB
//! value tables and 16 KiB of descriptor states that stay nearly all
//! zero) through the file, a quarter of fsprof's own CPU per short process
//! (docs/benchmarks/overhead.md), most of it cache misses on lines the
//! process never wrote. The reader knows where the shim writes: the
//! header's fields, names and slot directory entries, each slot record's
//! header and bitmap and the offsets its bitmap names (not its ~900 others),
//! each counter's fields and the buckets between those of its least and
//! greatest latency, and in each value table the rows between the same
//! (reader.rs). What else lies between the header page and `used`, or in
//! the last `top_used` bytes (where the shim puts its tables), and no
//! published allocation covers is the shim's private scratch (descriptor
//! states) or an allocation whose process did not live to publish it:
//! zeroed whole, as before.
//!
//! Trusting a pool's offsets to say where its process wrote gives that
//! process nothing it did not have: every process of the run maps the
//! whole control file writable and could write into any block, so the
//! worst either way is wrong counters, never a fault in fsprof. Offsets
//! are clipped to the block: words are marked in bitmaps of its size.

use fsprof_shim::abi;

const WORDS: usize = abi::FIRST_CHUNK / 8;
const LIMBS: usize = WORDS / 64;

/// One bit per limb of a block's bitmaps: which limbs may hold a bit.
const SUMMARY: usize = LIMBS / 64;
const _: () = assert!(LIMBS.is_multiple_of(64));

/// One bit per 8-byte word of a block.
#[derive(Clone)]
struct Bitmap([u64; LIMBS]);

impl Bitmap {
    /// Marks the words that `[off, off + len)` bytes touch, clipped to the
    /// block, and their limbs in `limbs`.
    fn mark(&mut self, off: usize, len: usize, limbs: &mut [u64; SUMMARY]) {
        let first = off / 8;
        let end = off.saturating_add(len).div_ceil(8).min(WORDS);
        let mut w = first;
        while w < end {
            let (limb, bit) = (w / 64, w % 64);
            let n = (end - w).min(64 - bit);
            self.0[limb] |= span(bit, n);
            limbs[limb / 64] |= 1 << (limb % 64);
            w += n;
        }
    }
}

/// `n` (1..=64) bits from `bit`.
fn span(bit: usize, n: usize) -> u64 {
    let ones = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    ones << bit
}

/// The allocations a block's pool published and the parts of them its
/// process may have written, as the reader found them.
///
/// A short process marks a few dozen of the 256 limbs of each bitmap:
/// clearing both whole (4 KiB) and looking at every limb when giving its
/// block back was ~2 µs of fsprof's CPU a process. `touched` says which
/// limbs of either bitmap hold a bit, so only those are cleared and read.
#[derive(Clone)]
pub struct Written {
    alloc: Bitmap,
    dirty: Bitmap,
    touched: [u64; SUMMARY],
}

impl Default for Written {
    fn default() -> Self {
        Written {
            alloc: Bitmap([0; LIMBS]),
            dirty: Bitmap([0; LIMBS]),
            touched: [0; SUMMARY],
        }
    }
}

impl Written {
    pub fn clear(&mut self) {
        for k in limbs_of(self.touched) {
            self.alloc.0[k] = 0;
            self.dirty.0[k] = 0;
        }
        self.touched = [0; SUMMARY];
    }

    /// An allocation of `len` bytes at pool offset `off` (only those in
    /// the block count).
    pub fn allocation(&mut self, off: usize, len: usize) {
        self.alloc.mark(off, len, &mut self.touched);
    }

    /// Bytes the process may have written.
    pub fn dirty(&mut self, off: usize, len: usize) {
        self.dirty.mark(off, len, &mut self.touched);
    }

    /// The byte ranges `(offset, length)` to zero, in order, each a
    /// multiple of 8: what may have been written, and what no allocation
    /// covers of the two parts the pool handed out: between the header
    /// page and `used`, and the last `top_used` bytes (its tables; both
    /// clamped to the block). Handed to `zero` one range at a time,
    /// neighbours joined (a list of them was an allocation a process).
    pub fn zero_each(&self, used: usize, top_used: usize, mut zero: impl FnMut(usize, usize)) {
        let lo = abi::PROC_HDR_SIZE / 8;
        let hi = used.clamp(abi::PROC_HDR_SIZE, abi::FIRST_CHUNK).div_ceil(8);
        let top = (abi::FIRST_CHUNK - top_used.min(abi::FIRST_CHUNK)).max(abi::PROC_HDR_SIZE) / 8;
        let mut run: Option<(usize, usize)> = None;
        // Limbs that can hold a word to zero: those marked, and those of
        // the two parts handed out (where no allocation may cover a word).
        let mut limbs = self.touched;
        for (first, end) in [(lo, hi), (top, WORDS)] {
            for k in first / 64..end.div_ceil(64) {
                limbs[k / 64] |= 1 << (k % 64);
            }
        }
        for k in limbs_of(limbs) {
            let handed_out = words_in(k, lo, hi) | words_in(k, top, WORDS);
            let mut bits = self.dirty.0[k] | (handed_out & !self.alloc.0[k]);
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                let n = (!(bits >> bit)).trailing_zeros() as usize;
                bits &= !span(bit, n);
                let (off, len) = (8 * (64 * k + bit), 8 * n);
                match &mut run {
                    Some(last) if last.0 + last.1 == off => last.1 += len,
                    _ => {
                        if let Some((o, n)) = run.replace((off, len)) {
                            zero(o, n);
                        }
                    }
                }
            }
        }
        if let Some((o, n)) = run {
            zero(o, n);
        }
    }

    /// [`Written::zero_each`]'s ranges, listed.
    #[cfg(test)]
    fn to_zero(&self, used: usize, top_used: usize) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        self.zero_each(used, top_used, |off, len| runs.push((off, len)));
        runs
    }
}

/// The limbs whose bits are set in `summary`, in order.
fn limbs_of(summary: [u64; SUMMARY]) -> impl Iterator<Item = usize> {
    summary
        .into_iter()
        .enumerate()
        .flat_map(|(i, bits)| ones(i, bits))
}

/// The bits set in `bits`, word `i` of a bitmap, as indices in it, in
/// order.
pub(crate) fn ones(i: usize, mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let b = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        Some(64 * i + b)
    })
}

/// The bits of limb `k` for words `[lo, hi)`.
fn words_in(k: usize, lo: usize, hi: usize) -> u64 {
    let (first, end) = (lo.max(64 * k), hi.min(64 * k + 64));
    if first >= end {
        0
    } else {
        span(first - 64 * k, end - first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroes_what_was_written_and_what_no_allocation_covers() {
        let hdr = abi::PROC_HDR_SIZE;
        let mut w = Written::default();
        w.dirty(0, 100);
        // A table of 4096 bytes of which 64 were written, a counter
        // written whole, scratch nobody published between them.
        w.allocation(hdr, 4096);
        w.dirty(hdr + 1000, 64);
        w.allocation(hdr + 8192, 584);
        w.dirty(hdr + 8192, 584);
        assert_eq!(
            w.to_zero(hdr + 8192 + 584, 0),
            [(0, 104), (hdr + 1000, 64), (hdr + 4096, 4096 + 584)]
        );
    }

    #[test]
    fn offsets_beyond_the_block_or_unaligned_are_clipped_to_it() {
        let mut w = Written::default();
        w.dirty(abi::FIRST_CHUNK - 4, 1 << 40);
        w.dirty(usize::MAX - 3, 100);
        w.allocation(abi::PROC_HDR_SIZE, usize::MAX);
        w.dirty(abi::PROC_HDR_SIZE + 3, 2);
        let runs = w.to_zero(usize::MAX, usize::MAX);
        let hdr = abi::PROC_HDR_SIZE;
        assert_eq!(
            runs,
            [(hdr, 8), (abi::FIRST_CHUNK - 8, 8)],
            "every range inside the block, whole words"
        );
    }

    /// A block's marks are gone once cleared, wherever they were: the
    /// next block read starts from nothing.
    #[test]
    fn clear_forgets_every_mark() {
        let mut w = Written::default();
        for off in [0, 8 * 64 * 100 + 16, abi::FIRST_CHUNK - 8] {
            w.dirty(off, 8);
            w.allocation(off, 64);
        }
        w.clear();
        assert_eq!(w.to_zero(0, 0), []);
        w.dirty(8 * 64 * 100 + 64, 8);
        assert_eq!(w.to_zero(0, 0), [(8 * 64 * 100 + 64, 8)]);
    }

    #[test]
    fn without_allocations_everything_below_used_is_zeroed() {
        let w = Written::default();
        let hdr = abi::PROC_HDR_SIZE;
        assert_eq!(w.to_zero(20_000, 0), [(hdr, 20_000 - hdr)]);
        assert_eq!(w.to_zero(0, 0), []);
    }

    /// The tables at the block's end: a table's written rows, and what of
    /// the end part no allocation covers (the space before a table, the
    /// descriptor states), but not the free room between the two parts.
    #[test]
    fn the_end_part_is_zeroed_like_the_start_part() {
        let (hdr, end) = (abi::PROC_HDR_SIZE, abi::FIRST_CHUNK);
        let mut w = Written::default();
        w.allocation(end - 8192 + 1472, 4096);
        w.dirty(end - 8192 + 2048, 128);
        assert_eq!(
            w.to_zero(hdr + 64, 8192),
            [
                (hdr, 64),
                (end - 8192, 1472),
                (end - 8192 + 2048, 128),
                (end - 4096 + 1472, 4096 - 1472)
            ]
        );
    }
}
