//! The bit masks of the JSON string scanners: for a block of 16 or 64 bytes, which
//! bytes are quotes, backslashes or control bytes (SSE2 through `safe_arch` on x86-64,
//! SWAR from 8-byte words elsewhere, both in the tests), and which bytes an odd run of
//! backslashes escapes (the simdjson method). Only bits here: what a string is, is in
//! [`super::string`].

/// Bit k is set when byte k of `chunk` must be escaped in a JSON string (a quote, a
/// backslash, a control byte) or equals `also`, when given.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn needs_escape16(chunk: &[u8; 16], also: Option<u8>) -> u32 {
    use safe_arch::{
        cmp_eq_mask_i8_m128i, load_unaligned_m128i, min_u8_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let v = load_unaligned_m128i(chunk);
    let eq = |c: u8| cmp_eq_mask_i8_m128i(v, set_splat_i8_m128i(c as i8));
    let control = cmp_eq_mask_i8_m128i(min_u8_m128i(v, set_splat_i8_m128i(0x1f)), v);
    let mut m = move_mask_i8_m128i(eq(b'"')) | move_mask_i8_m128i(eq(b'\\'));
    m |= move_mask_i8_m128i(control);
    if let Some(c) = also {
        m |= move_mask_i8_m128i(eq(c));
    }
    m as u32 & 0xFFFF
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn needs_escape16(chunk: &[u8; 16], also: Option<u8>) -> u32 {
    let word = |k: usize| {
        let v = u64::from_le_bytes(chunk[k..k + 8].try_into().expect("8 bytes"));
        let mut m = eq_bytes(v, b'"') | eq_bytes(v, b'\\') | ctl_bytes(v);
        if let Some(c) = also {
            m |= eq_bytes(v, c);
        }
        u32::from(pack(m))
    };
    word(0) | (word(8) << 8)
}

/// Bit k is set when byte k is a backslash.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn backslash_mask16(chunk: &[u8; 16]) -> u32 {
    use safe_arch::{cmp_eq_mask_i8_m128i, load_unaligned_m128i, move_mask_i8_m128i};
    let v = load_unaligned_m128i(chunk);
    let bs = safe_arch::set_splat_i8_m128i(b'\\' as i8);
    move_mask_i8_m128i(cmp_eq_mask_i8_m128i(v, bs)) as u32 & 0xFFFF
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn backslash_mask16(chunk: &[u8; 16]) -> u32 {
    let word = |k: usize| {
        let v = u64::from_le_bytes(chunk[k..k + 8].try_into().expect("8 bytes"));
        u32::from(pack(eq_bytes(v, b'\\')))
    };
    word(0) | (word(8) << 8)
}

/// Bit k is set when byte k of a 64-byte block is a quote, a backslash, a control byte.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Masks {
    pub(super) quote: u64,
    pub(super) backslash: u64,
    pub(super) control: u64,
}

/// [`Masks`] with SSE2 (part of every x86-64 CPU): 16 bytes per compare.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn masks(block: &[u8; 64]) -> Masks {
    use safe_arch::{
        cmp_eq_mask_i8_m128i, load_unaligned_m128i, min_u8_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let quote = set_splat_i8_m128i(b'"' as i8);
    let backslash = set_splat_i8_m128i(b'\\' as i8);
    let below_space = set_splat_i8_m128i(0x1f);
    let mut m = Masks {
        quote: 0,
        backslash: 0,
        control: 0,
    };
    for (k, part) in block.chunks_exact(16).enumerate() {
        let v = load_unaligned_m128i(part.try_into().expect("16 bytes"));
        // move_mask gives 16 bits in an i32: through u16 to drop the sign extension
        let bits = |x| u64::from(move_mask_i8_m128i(x) as u16) << (16 * k);
        m.quote |= bits(cmp_eq_mask_i8_m128i(v, quote));
        m.backslash |= bits(cmp_eq_mask_i8_m128i(v, backslash));
        m.control |= bits(cmp_eq_mask_i8_m128i(min_u8_m128i(v, below_space), v));
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn masks(block: &[u8; 64]) -> Masks {
    masks_swar(block)
}

/// [`Masks`] from 8-byte words (SWAR): the portable version.
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
pub(super) fn masks_swar(block: &[u8; 64]) -> Masks {
    let mut m = Masks {
        quote: 0,
        backslash: 0,
        control: 0,
    };
    for (k, word) in block.chunks_exact(8).enumerate() {
        let v = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        m.quote |= u64::from(pack(eq_bytes(v, b'"'))) << (8 * k);
        m.backslash |= u64::from(pack(eq_bytes(v, b'\\'))) << (8 * k);
        m.control |= u64::from(pack(ctl_bytes(v))) << (8 * k);
    }
    m
}

#[cfg(any(not(target_arch = "x86_64"), test))]
pub(super) const LO: u64 = 0x0101_0101_0101_0101;
#[cfg(any(not(target_arch = "x86_64"), test))]
pub(super) const HI: u64 = 0x8080_8080_8080_8080;
#[cfg(any(not(target_arch = "x86_64"), test))]
pub(super) const LO7: u64 = 0x7F7F_7F7F_7F7F_7F7F;

/// High bit set in each byte of `v` equal to `c` (exact: no borrow between bytes).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
pub(super) fn eq_bytes(v: u64, c: u8) -> u64 {
    let x = v ^ (LO * c as u64);
    !(((x & LO7) + LO7) | x) & HI
}

/// High bit set in each byte of `v` below 0x20 (exact).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
pub(super) fn ctl_bytes(v: u64) -> u64 {
    !(((v & LO7) + LO * 0x60) | v) & HI
}

/// The high bit of each byte of `m` (a SWAR mask), packed into 8 bits (bit k = byte k).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
pub(super) fn pack(m: u64) -> u8 {
    ((m >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// The 64 bytes of a string's body from one offset, read for the string scanners.
pub(super) struct Block<'a> {
    pub(super) block: &'a [u8; 64],
    /// The bytes of the text from the offset on (fewer than 64 in the last block).
    pub(super) avail: usize,
    pub(super) m: Masks,
    /// The bytes escaped by a backslash, and whether a backslash run goes on past them.
    pub(super) escaped: u64,
    pub(super) carry: bool,
    /// The quotes not escaped: the first one closes the string.
    pub(super) quotes: u64,
}

impl<'a> Block<'a> {
    /// The block of `b` at `i`; `esc_in` is 1 when `b[i]` is escaped by a run that
    /// ended the block before. The last bytes are copied into `tail` and padded with
    /// spaces: neither quotes, nor backslashes, nor control bytes (an escaped space is
    /// an invalid escape: byte-wise).
    #[inline(always)]
    pub(super) fn at(
        b: &'a [u8],
        i: usize,
        esc_in: u64,
        tail: &'a mut std::mem::MaybeUninit<[u8; 64]>,
    ) -> Block<'a> {
        let avail = b.len().saturating_sub(i);
        let block: &[u8; 64] = if avail >= 64 {
            b[i..i + 64].try_into().expect("64 bytes")
        } else {
            // Written only here: most strings end in a whole block.
            let tail = tail.write([b' '; 64]);
            tail[..avail].copy_from_slice(&b[i..]);
            tail
        };
        let m = masks(block);
        let (escaped, carry) = escaped_bytes(m.backslash, esc_in);
        let quotes = m.quote & !escaped;
        Block {
            block,
            avail,
            m,
            escaped,
            carry,
            quotes,
        }
    }
}

/// The bytes of a 64-byte block escaped by a backslash (bit k: byte k follows an odd
/// run of backslashes), given its backslashes and whether its first byte is escaped
/// by a run that ended the block before; and whether a run goes on into the next block.
#[inline(always)]
pub(super) fn escaped_bytes(backslash: u64, esc_in: u64) -> (u64, bool) {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    if backslash == 0 && esc_in == 0 {
        return (0, false);
    }
    let starts = backslash & !esc_in;
    let follows = (starts << 1) | esc_in;
    let odd_starts = starts & !EVEN & !follows;
    let (even_seq, carry) = odd_starts.overflowing_add(starts);
    ((EVEN ^ (even_seq << 1)) & follows, carry)
}
