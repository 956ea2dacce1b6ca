//! Fast JSON validation and string decoding without building values.
//!
//! traj-filter's pass-through path validates every row it keeps, and its predicates walk
//! rows as raw JSON text; both spend most of their time inside JSON strings (tool output
//! embedded as JSON: a backslash every few bytes). So strings are scanned 64 bytes at a
//! time from bit masks of quotes, backslashes and control bytes (SSE2 through
//! `safe_arch` on x86-64, SWAR elsewhere), the simdjson way; the structure outside
//! strings, a small part of the bytes, is walked with an explicit stack.

use std::borrow::Cow;

/// Walk the members of the object at `b[i..]`, validating every value; `f` gets each
/// key (raw, without quotes) and its value's span. Returns the offset after the object.
pub(crate) fn object_members<'b>(
    b: &'b [u8],
    i: usize,
    mut f: impl FnMut(&'b [u8], usize, usize),
) -> Result<usize, usize> {
    object_members_with(b, i, |key, vs| {
        let ve = scan_value_at(b, vs, 1)?;
        f(key, vs, ve);
        Ok(ve)
    })
}

/// [`object_members`] where `f` walks each value itself: it gets the key and the
/// value's start, and returns the offset after the value, which it has validated.
pub(crate) fn object_members_with<'b>(
    b: &'b [u8],
    i: usize,
    mut f: impl FnMut(&'b [u8], usize) -> Result<usize, usize>,
) -> Result<usize, usize> {
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'{') {
        return Err(i);
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Ok(i + 1);
    }
    let mut keys: Vec<&[u8]> = Vec::new();
    loop {
        if b.get(i) != Some(&b'"') {
            return Err(i);
        }
        let ks = i + 1;
        i = scan_string(b, ks)?;
        let key = &b[ks..i - 1];
        // The same key twice: refused, as every stage refuses it.
        if keys.contains(&key) {
            return Err(ks - 1);
        }
        keys.push(key);
        i = skip_ws(b, i);
        if b.get(i) != Some(&b':') {
            return Err(i);
        }
        let vs = skip_ws(b, i + 1);
        let ve = f(key, vs)?;
        i = skip_ws(b, ve);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Ok(i + 1),
            _ => return Err(i),
        }
    }
}

/// The spans of the elements of the array at `b[i..]` (each walked by `value`, which
/// returns the offset after the element or where it is wrong), and the offset after the
/// array.
pub(crate) fn array_items(
    b: &[u8],
    i: usize,
    value: impl Fn(&[u8], usize) -> Result<usize, usize>,
) -> Result<(Vec<(usize, usize)>, usize), usize> {
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'[') {
        return Err(i);
    }
    let mut items = Vec::new();
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Ok((items, i + 1));
    }
    loop {
        let end = value(b, i)?;
        items.push((i, end));
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => return Ok((items, i + 1)),
            _ => return Err(i),
        }
    }
}

/// Decode raw JSON text that is a string (validated), borrowing when it has no escape.
///
/// Escapes are dense in tool output embedded as JSON (one every few bytes), so plain
/// runs are copied 16 bytes at a time into a buffer as long as the input (the output is
/// never longer) and cut at the next backslash: no call per escape.
pub fn decode_str(raw: &str) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let b = inner.as_bytes();
    let Some(first) = memchr::memchr(b'\\', b) else {
        return Some(Cow::Borrowed(inner));
    };
    let n = b.len();
    // Room for a whole 16-byte chunk past the end, so chunks are appended whole and the
    // buffer cut back to the run (no zeroing, no growth).
    let mut out: Vec<u8> = Vec::with_capacity(n + 16);
    out.extend_from_slice(&b[..first]);
    let mut i = first;
    while i < n {
        // here b[i] is a backslash
        let esc = *b.get(i + 1)?;
        let simple = match esc {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'b' => 8,
            b'f' => 12,
            b'"' | b'\\' | b'/' => esc,
            b'u' => 0,
            _ => return None,
        };
        if esc == b'u' {
            let hex =
                |at: usize| -> Option<u32> { u32::from_str_radix(inner.get(at..at + 4)?, 16).ok() };
            let mut c = hex(i + 2)?;
            i += 6;
            if (0xD800..0xDC00).contains(&c)
                && b.get(i) == Some(&b'\\')
                && b.get(i + 1) == Some(&b'u')
                && let Some(lo) = hex(i + 2).filter(|lo| (0xDC00..0xE000).contains(lo))
            {
                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
            let ch = char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
            out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
        } else {
            out.push(simple);
            i += 2;
        }
        // copy plain bytes up to the next backslash
        while i + 16 <= n {
            let chunk: &[u8; 16] = b[i..i + 16].try_into().expect("16 bytes");
            let w = out.len();
            out.extend_from_slice(chunk);
            let m = backslash_mask16(chunk);
            if m == 0 {
                i += 16;
            } else {
                let d = m.trailing_zeros() as usize;
                out.truncate(w + d);
                i += d;
                break;
            }
        }
        if i + 16 > n {
            let run = b[i..].iter().position(|&c| c == b'\\').unwrap_or(n - i);
            out.extend_from_slice(&b[i..i + run]);
            i += run;
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

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
fn backslash_mask16(chunk: &[u8; 16]) -> u32 {
    use safe_arch::{cmp_eq_mask_i8_m128i, load_unaligned_m128i, move_mask_i8_m128i};
    let v = load_unaligned_m128i(chunk);
    let bs = safe_arch::set_splat_i8_m128i(b'\\' as i8);
    move_mask_i8_m128i(cmp_eq_mask_i8_m128i(v, bs)) as u32 & 0xFFFF
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn backslash_mask16(chunk: &[u8; 16]) -> u32 {
    let word = |k: usize| {
        let v = u64::from_le_bytes(chunk[k..k + 8].try_into().expect("8 bytes"));
        u32::from(pack(eq_bytes(v, b'\\')))
    };
    word(0) | (word(8) << 8)
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/// Validate one JSON text without building it.
///
/// UTF-8 is checked once on the whole text with `simdutf8` (outside strings a
/// non-ASCII byte is a syntax error, so the scanners only look at ASCII).
pub fn json_is_valid(b: &[u8]) -> bool {
    simdutf8::basic::from_utf8(b).is_ok() && scan_json(b).is_ok()
}

pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Bit k is set when byte k of a 64-byte block is a quote, a backslash, a control byte.
#[derive(Debug, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    control: u64,
}

/// [`Masks`] with SSE2 (part of every x86-64 CPU): 16 bytes per compare.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks(block: &[u8; 64]) -> Masks {
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
fn masks(block: &[u8; 64]) -> Masks {
    masks_swar(block)
}

/// [`Masks`] from 8-byte words (SWAR): the portable version.
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn masks_swar(block: &[u8; 64]) -> Masks {
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
const LO: u64 = 0x0101_0101_0101_0101;
#[cfg(any(not(target_arch = "x86_64"), test))]
const HI: u64 = 0x8080_8080_8080_8080;
#[cfg(any(not(target_arch = "x86_64"), test))]
const LO7: u64 = 0x7F7F_7F7F_7F7F_7F7F;

/// High bit set in each byte of `v` equal to `c` (exact: no borrow between bytes).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn eq_bytes(v: u64, c: u8) -> u64 {
    let x = v ^ (LO * c as u64);
    !(((x & LO7) + LO7) | x) & HI
}

/// High bit set in each byte of `v` below 0x20 (exact).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn ctl_bytes(v: u64) -> u64 {
    !(((v & LO7) + LO * 0x60) | v) & HI
}

/// The high bit of each byte of `m` (a SWAR mask), packed into 8 bits (bit k = byte k).
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn pack(m: u64) -> u8 {
    ((m >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// `i` is just after the opening quote; returns the offset after the closing one.
///
/// 64 bytes at a time, without a branch per escape (tool output embedded as JSON has
/// an escape every few bytes): the masks of quotes and backslashes give the escaped
/// bytes (the simdjson odd-backslash-run method), hence the closing quote. Escape
/// letters are checked from the escaped-byte mask (`\u` with its four hex digits);
/// control bytes and invalid escapes go to the byte-wise scanner, which finds the
/// error's offset. Callers check UTF-8 on the whole text.
#[inline]
pub(crate) fn scan_string(b: &[u8], i: usize) -> Result<usize, usize> {
    scan_string_with::<false>(b, i, &mut true)
}

/// `scan_string` (the validating string scanner), also telling whether the string is
/// in the one spelling [`crate::format::pyjson::write_str`] writes (Python's
/// `json.dumps` with `ensure_ascii=False`): no escape but `\"`, `\\`, `\n`, `\r`, `\t`,
/// `\b`, `\f`, and `\u00xx` (lowercase) for the other control characters. `i` is just
/// after the opening quote; returns the offset after the closing one, and that answer.
pub fn scan_string_spelling(b: &[u8], i: usize) -> Result<(usize, bool), usize> {
    let mut as_is = true;
    let end = scan_string_with::<true>(b, i, &mut as_is)?;
    Ok((end, as_is))
}

/// True when the six bytes `\uXXXX` at `e` are how Python writes a control character
/// (one without a short escape), lowercase.
#[inline]
fn python_u_escape(e: &[u8]) -> bool {
    e.len() >= 6
        && e[2..4] == *b"00"
        && matches!(e[4], b'0' | b'1')
        && matches!(e[5], b'0'..=b'9' | b'a'..=b'f')
        && !matches!(&e[4..6], b"08" | b"09" | b"0a" | b"0c" | b"0d")
}

/// The scanner behind [`scan_string`] and [`scan_string_spelling`]; with `SPELLING`,
/// `as_is` is cleared at the first escape Python would not write (a string that needs
/// the byte-wise scanner, for a surrogate pair say, is never in that spelling).
#[inline(always)]
fn scan_string_with<const SPELLING: bool>(
    b: &[u8],
    mut i: usize,
    as_is: &mut bool,
) -> Result<usize, usize> {
    let mut esc_in = 0u64; // 1: b[i] is escaped by a backslash run ending at i - 1
    let mut tail = std::mem::MaybeUninit::uninit();
    loop {
        let Block {
            block,
            avail,
            m,
            escaped,
            carry,
            quotes,
        } = Block::at(b, i, esc_in, &mut tail);
        // bytes up to and including the closing quote (all of them when it is not here)
        let upto = quotes ^ quotes.wrapping_sub(1);
        let mut rare = m.control & upto != 0;
        // escaped bytes other than `"` and `\\` must be a valid escape letter
        let mut letters = escaped & !(m.quote | m.backslash) & upto;
        while letters != 0 && !rare {
            let at = letters.trailing_zeros() as usize;
            rare = match ESCAPE_LEN[block[at] as usize] {
                2 => {
                    if SPELLING && block[at] == b'/' {
                        *as_is = false;
                    }
                    false
                }
                // Surrogates (a pair, or one alone: refused) go the slow way.
                6 => {
                    let ok = b
                        .get(i + at + 1..i + at + 5)
                        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit) && !is_surrogate(h));
                    if SPELLING && ok && !python_u_escape(&b[i + at - 1..]) {
                        *as_is = false;
                    }
                    !ok
                }
                _ => true,
            };
            letters &= letters - 1;
        }
        if rare {
            if SPELLING {
                *as_is = false;
            }
            // Byte by byte past this block, then back to blocks.
            let from = if esc_in == 1 { i - 1 } else { i };
            match scan_string_bytes(b, from, i + 64)? {
                Step::Closed(end) => return Ok(end),
                Step::At(pos) => {
                    i = pos;
                    esc_in = 0;
                    continue;
                }
            }
        }
        if quotes != 0 {
            return Ok(i + quotes.trailing_zeros() as usize + 1);
        }
        if avail <= 64 {
            return Err(b.len()); // no closing quote
        }
        esc_in = u64::from(carry);
        i += 64;
    }
}

/// The 64 bytes of a string's body from one offset, read for the string scanners.
struct Block<'a> {
    block: &'a [u8; 64],
    /// The bytes of the text from the offset on (fewer than 64 in the last block).
    avail: usize,
    m: Masks,
    /// The bytes escaped by a backslash, and whether a backslash run goes on past them.
    escaped: u64,
    carry: bool,
    /// The quotes not escaped: the first one closes the string.
    quotes: u64,
}

impl<'a> Block<'a> {
    /// The block of `b` at `i`; `esc_in` is 1 when `b[i]` is escaped by a run that
    /// ended the block before. The last bytes are copied into `tail` and padded with
    /// spaces: neither quotes, nor backslashes, nor control bytes (an escaped space is
    /// an invalid escape: byte-wise).
    #[inline(always)]
    fn at(
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
fn escaped_bytes(backslash: u64, esc_in: u64) -> (u64, bool) {
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

/// The offset after the closing quote of the string whose body starts at `b[i]`, in
/// text already known to be valid JSON: 64 bytes at a time, nothing checked (`b.len()`
/// when there is no closing quote).
fn skip_string(b: &[u8], mut i: usize) -> usize {
    let mut esc_in = 0u64;
    let mut tail = std::mem::MaybeUninit::uninit();
    loop {
        let block = Block::at(b, i, esc_in, &mut tail);
        if block.quotes != 0 {
            return i + block.quotes.trailing_zeros() as usize + 1;
        }
        if block.avail <= 64 {
            return b.len();
        }
        esc_in = u64::from(block.carry);
        i += 64;
    }
}

/// The offset after the JSON value at `b[i..]` (after optional white space), in text
/// already known to be valid JSON (a line serde_json parsed): strings are skipped 64
/// bytes at a time, nothing is checked. Never past `b.len()`.
pub(crate) fn skip_value(b: &[u8], i: usize) -> usize {
    let mut i = skip_ws(b, i);
    match b.get(i) {
        Some(b'"') => return skip_string(b, i + 1),
        Some(b'{' | b'[') => {}
        // A number or a literal: up to what ends it.
        Some(_) => {
            return b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(b.len(), |k| i + k);
        }
        None => return i,
    }
    let mut depth = 0usize;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                i = skip_string(b, i + 1);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Where the byte-wise scanner stopped.
enum Step {
    /// The string closed; offset after the quote.
    Closed(usize),
    /// Reached `limit` at a boundary between characters (not inside an escape).
    At(usize),
}

/// The byte-wise string scanner (tails, rare escapes, control bytes),
/// up to the closing quote or to the first character boundary at or after `limit`.
fn scan_string_bytes(b: &[u8], mut i: usize, limit: usize) -> Result<Step, usize> {
    while i < b.len() {
        if i >= limit {
            return Ok(Step::At(i));
        }
        match b[i] {
            b'"' => return Ok(Step::Closed(i + 1)),
            b'\\' => i += escape_len(b, i)?,
            0..=0x1f => return Err(i),
            _ => i += 1, // UTF-8 is checked by the callers, on the whole text
        }
    }
    Err(i)
}

/// Length of each escape sequence by the byte after the backslash (0: invalid).
const ESCAPE_LEN: [u8; 256] = {
    let mut t = [0u8; 256];
    let simple = *b"\"\\/bfnrt";
    let mut k = 0;
    while k < simple.len() {
        t[simple[k] as usize] = 2;
        k += 1;
    }
    t[b'u' as usize] = 6;
    t
};

/// Four hex digits in D800..=DFFF.
#[inline]
fn is_surrogate(hex: &[u8]) -> bool {
    matches!(hex[0], b'd' | b'D') && matches!(hex[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
}

/// Four hex digits in D800..=DBFF.
#[inline]
fn is_high_surrogate(hex: &[u8]) -> bool {
    matches!(hex[0], b'd' | b'D') && matches!(hex[1], b'8'..=b'9' | b'a'..=b'b' | b'A'..=b'B')
}

/// Length of the escape sequence at `b[k]` (a backslash), if it is valid (a surrogate
/// pair is one sequence of 12 bytes).
#[inline(always)]
fn escape_len(b: &[u8], k: usize) -> Result<usize, usize> {
    let Some(&c) = b.get(k + 1) else {
        return Err(k);
    };
    match ESCAPE_LEN[c as usize] {
        2 => Ok(2),
        6 => match b.get(k + 2..k + 6) {
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) && !is_surrogate(hex) => Ok(6),
            // A high surrogate must be followed by a low one, as serde_json (and so every
            // stage that parses rows) requires; a lone surrogate is refused.
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) && is_high_surrogate(hex) => {
                match b.get(k + 6..k + 12) {
                    Some(lo)
                        if lo[0] == b'\\'
                            && lo[1] == b'u'
                            && lo[2..].iter().all(u8::is_ascii_hexdigit)
                            && is_surrogate(&lo[2..])
                            && !is_high_surrogate(&lo[2..]) =>
                    {
                        Ok(12)
                    }
                    _ => Err(k),
                }
            }
            _ => Err(k),
        },
        _ => Err(k),
    }
}

fn scan_number(b: &[u8], mut i: usize) -> Result<usize, usize> {
    let digits = |b: &[u8], mut i: usize| {
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        (i, i - s)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i).0,
        _ => return Err(i),
    }
    if b.get(i) == Some(&b'.') {
        let (j, n) = digits(b, i + 1);
        if n == 0 {
            return Err(j);
        }
        i = j;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let (j, n) = digits(b, i);
        if n == 0 {
            return Err(j);
        }
        i = j;
    }
    Ok(i)
}

/// Validate an object key and its colon at `b[i..]` (a quote expected at `i`); returns
/// the offset after the colon.
#[inline]
fn scan_key(b: &[u8], i: usize) -> Result<usize, usize> {
    if b.get(i) != Some(&b'"') {
        return Err(i);
    }
    let i = skip_ws(b, scan_string(b, i + 1)?);
    if b.get(i) == Some(&b':') {
        Ok(i + 1)
    } else {
        Err(i)
    }
}

/// Validate a whole JSON text.
pub(crate) fn scan_json(b: &[u8]) -> Result<(), usize> {
    let end = scan_value(b, 0)?;
    let end = skip_ws(b, end);
    if end == b.len() { Ok(()) } else { Err(end) }
}

/// Nesting every stage refuses (serde_json's limit): a container this many levels deep,
/// the row itself being level 1.
pub(crate) const MAX_DEPTH: usize = 128;

/// Validate the JSON value starting at `b[i..]` (after optional white space); returns
/// the offset just after it. Structural validation with an explicit stack; a value that
/// nests [`MAX_DEPTH`] levels, or an object with a key twice, is invalid too.
pub(crate) fn scan_value(b: &[u8], i: usize) -> Result<usize, usize> {
    scan_value_at(b, i, 0)
}

/// [`scan_value`] for a value inside `depth` containers (1: a member of the row).
pub(crate) fn scan_value_at(b: &[u8], i: usize, depth: usize) -> Result<usize, usize> {
    // stack of open containers: true = object, false = array
    let mut stack: Vec<bool> = Vec::new();
    // the keys of the open objects (raw, as written) and where each object's begin
    let mut keys: Vec<(usize, usize)> = Vec::new();
    let mut frames: Vec<usize> = Vec::new();
    let mut i = skip_ws(b, i);
    'value: loop {
        // parse one value at i
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b'{') => {
                if depth + stack.len() + 1 >= MAX_DEPTH {
                    return Err(i);
                }
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b'}') {
                    i += 1;
                } else {
                    stack.push(true);
                    frames.push(keys.len());
                    i = scan_new_key(b, i, &mut keys, &frames)?;
                    continue 'value;
                }
            }
            Some(b'[') => {
                if depth + stack.len() + 1 >= MAX_DEPTH {
                    return Err(i);
                }
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    stack.push(false);
                    continue 'value;
                }
            }
            Some(b'"') => i = scan_string(b, i + 1)?,
            Some(b't') if b[i..].starts_with(b"true") => i += 4,
            Some(b'f') if b[i..].starts_with(b"false") => i += 5,
            Some(b'n') if b[i..].starts_with(b"null") => i += 4,
            Some(b'-' | b'0'..=b'9') => i = scan_number(b, i)?,
            _ => return Err(i),
        }
        // after a value: close containers or go on with the next element
        loop {
            if stack.is_empty() {
                return Ok(i);
            }
            i = skip_ws(b, i);
            match stack.last() {
                None => return Ok(i),
                Some(&is_obj) => match b.get(i) {
                    Some(b',') => {
                        i = skip_ws(b, i + 1);
                        if is_obj {
                            i = scan_new_key(b, i, &mut keys, &frames)?;
                        }
                        continue 'value;
                    }
                    Some(b'}') if is_obj => {
                        stack.pop();
                        keys.truncate(frames.pop().unwrap_or(0));
                        i += 1;
                    }
                    Some(b']') if !is_obj => {
                        stack.pop();
                        i += 1;
                    }
                    _ => return Err(i),
                },
            }
        }
    }
}

/// [`scan_key`], refusing a key the innermost open object already has.
#[inline]
fn scan_new_key(
    b: &[u8],
    i: usize,
    keys: &mut Vec<(usize, usize)>,
    frames: &[usize],
) -> Result<usize, usize> {
    let next = scan_key(b, i)?;
    // The key is b[i + 1 .. end of its string); scan_key has checked it.
    let end = scan_string(b, i + 1)? - 1;
    let key = &b[i + 1..end];
    let first = frames.last().copied().unwrap_or(0);
    if keys[first..].iter().any(|&(s, e)| &b[s..e] == key) {
        return Err(i);
    }
    keys.push((i + 1, end));
    Ok(next)
}

#[cfg(test)]
mod validator_tests {
    use super::*;

    /// On valid JSON, skipping a value ends where validating it ends: every member of
    /// every fixture row, and values of each kind at the top.
    #[test]
    fn skip_value_ends_where_scan_value_ends() {
        let mut n = 0;
        for p in crate::fixtures::jsonl_files() {
            let text = std::fs::read_to_string(&p).expect("fixture");
            for line in text.lines().filter(|l| json_is_valid(l.as_bytes())) {
                let b = line.as_bytes();
                let _ = object_members(b, 0, |_, vs, ve| {
                    assert_eq!(skip_value(b, vs), ve, "{}", &line[vs..]);
                    if b[vs] == b'[' {
                        let (items, end) =
                            array_items(b, vs, |b, i| scan_value_at(b, i, 2)).expect("valid");
                        let skipped = array_items(b, vs, |b, i| Ok(skip_value(b, i)));
                        assert_eq!(skipped, Ok((items, end)));
                    }
                    n += 1;
                });
            }
        }
        assert!(n > 1000, "{n} members");
        let quote_run = format!("\"{}\\\\\"", "x".repeat(62));
        for v in [
            "1",
            "-2.5e3 ",
            "true,",
            "null]",
            "\"a\\\"b\"x",
            "[]",
            "{}",
            " [1, {\"a\": [\"]\"]}] ,",
            quote_run.as_str(),
        ] {
            let b = v.as_bytes();
            assert_eq!(skip_value(b, 0), scan_value(b, 0).expect(v), "{v}");
        }
    }

    /// Assert that `line` is valid exactly when serde_json parses it, and that the
    /// string at `value` (the raw value of `key`) decodes as serde_json decodes it.
    /// Returns whether the line is valid.
    fn agrees_with_serde(line: &[u8], value: std::ops::Range<usize>, key: &str) -> bool {
        let parsed = serde_json::from_slice::<serde_json::Value>(line);
        let shown = String::from_utf8_lossy(line);
        assert_eq!(json_is_valid(line), parsed.is_ok(), "{shown}");
        if let Ok(v) = &parsed {
            let raw = std::str::from_utf8(&line[value]).unwrap();
            assert_eq!(
                decode_str(raw).unwrap(),
                v[key].as_str().unwrap(),
                "{shown}"
            );
        }
        parsed.is_ok()
    }

    #[test]
    fn decodes_surrogates_and_refuses_bad_escapes() {
        let d = |raw: &str| decode_str(raw).map(|c| c.into_owned());
        assert_eq!(d(r#""a\ud83d\ude00b""#).as_deref(), Some("a\u{1F600}b"));
        // a lone surrogate has no char: U+FFFD, as Python's `errors="replace"` would
        assert_eq!(d(r#""\ude00x""#).as_deref(), Some("\u{FFFD}x"));
        assert_eq!(
            d(r#""0123456789abcdef\\\"\/\b\f\n\r\t""#).as_deref(),
            Some("0123456789abcdef\\\"/\u{8}\u{c}\n\r\t")
        );
        assert_eq!(d(r#""\x""#), None);
        assert_eq!(d(r#""\u12""#), None);
        assert_eq!(d("no quotes"), None);
    }

    #[test]
    fn escape_masks_are_exact() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..20_000 {
            let mut chunk = [0u8; 16];
            for b in &mut chunk {
                *b = *rng.choice(b"\"\\<\x00\x1f\x20a\x7f\x80\xff").unwrap();
            }
            for also in [None, Some(b'<')] {
                let want = chunk.iter().enumerate().fold(0u32, |m, (k, &b)| {
                    let hit = b == b'"' || b == b'\\' || b < 0x20 || Some(b) == also;
                    m | (u32::from(hit) << k)
                });
                assert_eq!(needs_escape16(&chunk, also), want, "{chunk:?} {also:?}");
            }
        }
    }

    #[test]
    fn block_masks_are_exact() {
        let mut rng = fastrand::Rng::with_seed(3);
        for round in 0..20_000 {
            let mut block = [0u8; 64];
            for b in &mut block {
                // half the rounds from the bytes that matter, half from all bytes
                *b = if round % 2 == 0 {
                    *rng.choice(b"\"\\\x00\x1f\x20a\x7f\x80\xff").unwrap()
                } else {
                    rng.u8(..)
                };
            }
            let mut want = Masks {
                quote: 0,
                backslash: 0,
                control: 0,
            };
            for (k, &b) in block.iter().enumerate() {
                want.quote |= u64::from(b == b'"') << k;
                want.backslash |= u64::from(b == b'\\') << k;
                want.control |= u64::from(b < 0x20) << k;
            }
            assert_eq!(masks(&block), want, "{block:?}");
            assert_eq!(masks_swar(&block), want, "{block:?}");
        }
    }

    /// Long, mostly valid strings at every alignment: escapes and backslash runs across
    /// the 64-byte blocks, `\u` escapes cut by a block end, the last bytes of a line.
    /// (No surrogate pairs: an escaped backslash before one leaves a lone surrogate,
    /// which the JSON grammar allows, and so do we and Python, but serde_json refuses.)
    #[test]
    fn long_strings_across_blocks_agree_with_serde_json() {
        let common: [&[u8]; 9] = [
            b"abcdefghij",
            b"\\\"",
            b"\\n",
            b"\\\\",
            b"\\\\\\\"",
            b"\\u00e9",
            "é中".as_bytes(),
            b" ",
            b"\\/",
        ];
        let rare: [&[u8]; 7] = [b"\"", b"\\", b"\\x", b"\\u12g4", b"\t", b"\x01", b"\\u00"];
        let mut rng = fastrand::Rng::with_seed(11);
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..20_000 {
            let mut line = b"{\"".to_vec();
            line.extend(std::iter::repeat_n(b'k', rng.usize(1..70)));
            line.extend_from_slice(b"\": ");
            let value_start = line.len();
            line.push(b'"');
            for _ in 0..rng.usize(0..80) {
                let part = if rng.usize(0..300) == 0 {
                    rare[rng.usize(0..rare.len())]
                } else {
                    common[rng.usize(0..common.len())]
                };
                line.extend_from_slice(part);
            }
            line.push(b'"');
            let value_end = line.len();
            if rng.bool() {
                line.extend_from_slice(b", \"n\":\t[1, \"x\"]");
            }
            line.push(b'}');
            let key = "k".repeat(value_start - 5);
            if agrees_with_serde(&line, value_start..value_end, &key) {
                valid += 1
            } else {
                invalid += 1
            }
            // a truncated line is never valid
            let cut = rng.usize(1..line.len());
            assert!(
                !json_is_valid(&line[..cut])
                    || serde_json::from_slice::<serde_json::Value>(&line[..cut]).is_ok()
            );
        }
        assert!(
            valid > 5_000 && invalid > 1_000,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn random_strings_agree_with_serde_json() {
        let alphabet: [&[u8]; 16] = [
            b"a",
            b"\"",
            b"\\",
            b"n",
            b"u",
            b"0",
            b"\t",
            "é".as_bytes(),
            b"\\\"",
            b"\\n",
            b"\\u00e9",
            b"#",
            "中文".as_bytes(),
            "😀".as_bytes(),
            b"\xe4\xb8", // a truncated sequence: invalid UTF-8
            b"plain words",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..50_000 {
            let mut line = b"{\"k\": \"".to_vec();
            for _ in 0..rng.usize(0..120) {
                line.extend_from_slice(alphabet[rng.usize(0..alphabet.len())]);
            }
            line.extend_from_slice(b"\"}");
            agrees_with_serde(&line, 6..line.len() - 1, "k");
        }
    }

    #[test]
    fn agrees_with_serde_json() {
        let cases: &[&[u8]] = &[
            b"{}",
            b" { \"a\" : [1, -2.5e+3, true, false, null, {\"b\": []}, \"x\\u00e9\\n\\\"\"] } ",
            b"{\"a\":1,}",
            b"{\"a\" 1}",
            b"[1,]",
            b"{\"a\":01}",
            b"{\"a\":1.}",
            b"{\"a\":-}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\u12g4\"}",
            b"{\"a\":\"tab\there\"}",
            b"{\"a\":\"unterminated}",
            b"{\"a\":1}}",
            b"{\"a\":1} x",
            b"{\"a\":tru}",
            b"[[[[[]]]]]",
            b"[[[[[]]]]",
            b"{\"long string with no escapes at all, more than eight bytes\": \"and \\\"quotes\\\" too\"}",
            b"",
            b"   ",
            b"{\"a\":\"\xc3\xa9\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":1e5,\"b\":0.5E-2,\"c\":-0}",
        ];
        for c in cases {
            // serde_json's IgnoredAny skips UTF-8 checks inside strings; Value does not.
            let want = serde_json::from_slice::<serde_json::Value>(c).is_ok();
            assert_eq!(json_is_valid(c), want, "{}", String::from_utf8_lossy(c));
        }
    }
}
