//! JSON strings: the validating scanner (64 bytes at a time from [`super::simd`]'s
//! masks, a byte-wise scanner for tails, rare escapes and errors), the skipper for text
//! already known valid, the check for Python's own spelling of a string, and
//! [`decode_str`], which turns a raw string into its text.

use std::borrow::Cow;

use super::simd::*;

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
pub(super) fn python_u_escape(e: &[u8]) -> bool {
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
pub(super) fn scan_string_with<const SPELLING: bool>(
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

/// The offset after the closing quote of the string whose body starts at `b[i]`, in
/// text already known to be valid JSON: 64 bytes at a time, nothing checked (`b.len()`
/// when there is no closing quote).
pub(super) fn skip_string(b: &[u8], mut i: usize) -> usize {
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

/// Where the byte-wise scanner stopped.
pub(super) enum Step {
    /// The string closed; offset after the quote.
    Closed(usize),
    /// Reached `limit` at a boundary between characters (not inside an escape).
    At(usize),
}

/// The byte-wise string scanner (tails, rare escapes, control bytes),
/// up to the closing quote or to the first character boundary at or after `limit`.
pub(super) fn scan_string_bytes(b: &[u8], mut i: usize, limit: usize) -> Result<Step, usize> {
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
pub(super) const ESCAPE_LEN: [u8; 256] = {
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
pub(super) fn is_surrogate(hex: &[u8]) -> bool {
    matches!(hex[0], b'd' | b'D') && matches!(hex[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
}

/// Four hex digits in D800..=DBFF.
#[inline]
pub(super) fn is_high_surrogate(hex: &[u8]) -> bool {
    matches!(hex[0], b'd' | b'D') && matches!(hex[1], b'8'..=b'9' | b'a'..=b'b' | b'A'..=b'B')
}

/// Length of the escape sequence at `b[k]` (a backslash), if it is valid (a surrogate
/// pair is one sequence of 12 bytes).
#[inline(always)]
pub(super) fn escape_len(b: &[u8], k: usize) -> Result<usize, usize> {
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
