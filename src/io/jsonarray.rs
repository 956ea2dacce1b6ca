//! JSON-array files read as rows: `[{...}, {...}]` (pretty-printed or not) becomes one
//! line per element, so every stage reads a `.json` export as it reads JSONL.
//!
//! An element's bytes are kept as they are, except the white space between its tokens
//! (outside strings), which a line cannot hold. Line N of such a source is element N.
//! A `.json` file that does not start with `[` is read as JSONL.

use std::io::{self, BufRead};

use anyhow::Result;

use super::pieces::{PieceReader, Pieces};

/// Where the reader is in the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first element (just after `[`).
    Start,
    /// Inside an element: nesting depth, in a string, after a backslash in one.
    Element {
        depth: u32,
        string: bool,
        escape: bool,
    },
    /// After a `,` between elements.
    Between,
    /// After the closing `]`: only white space may follow.
    End,
}

/// A reader of the lines of a JSON array.
struct ArrayLines<R> {
    inner: R,
    name: String,
    state: State,
}

/// `r` as lines: the elements of the array it holds, or `r` itself when its first
/// non-blank byte (after a BOM) is not `[`.
pub fn lines_of_array(
    mut r: Box<dyn BufRead + Send>,
    name: String,
) -> Result<Box<dyn BufRead + Send>> {
    // One look at the first buffer (256 KiB): a file that starts with more white
    // space than that is read as JSONL.
    let buf = r.fill_buf()?;
    let skip = if buf.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    let rest = &buf[skip..];
    match rest.iter().position(|b| !b.is_ascii_whitespace()) {
        Some(k) if rest[k] == b'[' => {
            r.consume(skip + k + 1);
            Ok(Box::new(PieceReader::new(ArrayLines {
                inner: r,
                name,
                state: State::Start,
            })))
        }
        _ => Ok(r),
    }
}

impl<R: BufRead> ArrayLines<R> {
    /// Turn the next piece of input into output; false at the end of the input.
    fn refill(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        while out.is_empty() {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return match self.state {
                    State::End => Ok(false),
                    State::Element { depth, string, .. } if depth > 0 || string => {
                        // A cut element: a line of its own, which the row parser then
                        // rejects with its position.
                        self.state = State::End;
                        out.push(b'\n');
                        Ok(true)
                    }
                    // A whole element and no `]`: the file was cut between elements
                    // (a writer that died), which no row parser could tell.
                    State::Element { .. } => Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: the JSON array is not closed (the file ends after an \
                             element: cut short?)",
                            self.name
                        ),
                    )),
                    _ => Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: the JSON array is not closed", self.name),
                    )),
                };
            }
            let n = buf.len();
            let mut state = self.state;
            for &b in buf {
                state = step(state, b, out).map_err(|what| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", self.name))
                })?;
            }
            self.state = state;
            self.inner.consume(n);
        }
        Ok(true)
    }
}

/// One input byte.
fn step(state: State, b: u8, out: &mut Vec<u8>) -> Result<State, &'static str> {
    Ok(match state {
        State::Start | State::Between => {
            if b.is_ascii_whitespace() {
                state
            } else if b == b']' && state == State::Start {
                State::End
            } else {
                out.push(b);
                let depth = u32::from(b == b'{' || b == b'[');
                State::Element {
                    depth,
                    string: b == b'"',
                    escape: false,
                }
            }
        }
        State::Element {
            depth,
            string: true,
            escape,
        } => {
            out.push(b);
            State::Element {
                depth,
                string: b != b'"' || escape,
                escape: b == b'\\' && !escape,
            }
        }
        State::Element { depth, .. } => match b {
            b if b.is_ascii_whitespace() => state,
            b',' if depth == 0 => {
                out.push(b'\n');
                State::Between
            }
            b']' if depth == 0 => {
                out.push(b'\n');
                State::End
            }
            _ => {
                out.push(b);
                let depth = match b {
                    b'{' | b'[' => depth + 1,
                    b'}' | b']' => depth.saturating_sub(1),
                    _ => depth,
                };
                State::Element {
                    depth,
                    string: b == b'"',
                    escape: false,
                }
            }
        },
        State::End => {
            if !b.is_ascii_whitespace() {
                return Err("data after the end of the JSON array");
            }
            state
        }
    })
}

impl<R: BufRead> Pieces for ArrayLines<R> {
    fn next_piece(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        self.refill(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn lines(input: &[u8]) -> io::Result<String> {
        let r: Box<dyn BufRead + Send> = Box::new(io::Cursor::new(input.to_vec()));
        let mut r = lines_of_array(r, "x.json".into()).unwrap();
        let mut s = String::new();
        r.read_to_string(&mut s)?;
        Ok(s)
    }

    #[test]
    fn elements_become_lines_with_their_bytes() {
        let input = b"\xEF\xBB\xBF [\n  {\"a\": \"x, ]\\\" }\", \"n\": 1.50E+3},\n  {\"b\": [1, {\"c\": []}]}\n]\n";
        assert_eq!(
            lines(input).unwrap(),
            "{\"a\":\"x, ]\\\" }\",\"n\":1.50E+3}\n{\"b\":[1,{\"c\":[]}]}\n"
        );
        assert_eq!(lines(b"[]").unwrap(), "");
        assert_eq!(lines(b"[1, \"s\" ,null]").unwrap(), "1\n\"s\"\nnull\n");
    }

    #[test]
    fn jsonl_in_a_json_file_is_left_alone() {
        assert_eq!(
            lines(b"{\"a\":1}\n{\"a\":2}\n").unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
    }

    #[test]
    fn broken_arrays_are_errors_or_bad_lines() {
        assert!(lines(b"[{\"a\":1}] x").is_err());
        assert!(lines(b"[").is_err());
        // An unclosed last element ends as a line of its own (the row parser rejects it).
        assert_eq!(lines(b"[{\"a\":1},{\"b\"").unwrap(), "{\"a\":1}\n{\"b\"\n");
        // A whole last element and no `]`: cut between elements, an error.
        for cut in [&b"[{\"a\":1},\n{\"b\":2}\n"[..], b"[{\"a\":1}", b"[1, 2"] {
            let e = lines(cut).unwrap_err().to_string();
            assert!(e.contains("not closed"), "{e}");
        }
    }
}
