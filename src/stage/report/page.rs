//! The page: one HTML file with its styles, its script and its data inline (no network,
//! no server; a Content-Security-Policy forbids loading anything). The template, the
//! script and the styles are the files beside this one; the data is one JSON block
//! whose `<` are written `\u003c`, so no text in a row can end the block.

use std::io::Write;

use anyhow::Result;
use serde_json::{Value, json};

use super::Dataset;
use super::figures::Figure;

const TEMPLATE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("report.js");
const STYLE: &str = include_str!("report.css");

/// Writes JSON with every `<` as `\u003c` (only JSON strings can hold one).
struct NoLt<'a>(&'a mut dyn Write);

impl Write for NoLt<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while let Some(i) = memchr::memchr(b'<', rest) {
            self.0.write_all(&rest[..i])?;
            self.0.write_all(b"\\u003c")?;
            rest = &rest[i + 1..];
        }
        self.0.write_all(rest)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `s` with `&`, `<`, `>` and `"` escaped for HTML text.
fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Write the page. `meta`: title, tokenizer, budget, seed, max_rows.
pub fn write(
    out: &mut dyn Write,
    meta: &Value,
    datasets: &[Dataset],
    figs: &[Figure],
) -> Result<()> {
    let title = html_escape(meta["title"].as_str().unwrap_or("traj-report"));
    let fill = |part: &str| {
        part.replace("{{STYLE}}", STYLE)
            .replace("{{SCRIPT}}", SCRIPT)
            .replace("{{TITLE}}", &title)
    };
    let (head, tail) = TEMPLATE
        .split_once("{{DATA}}")
        .expect("the template has {{DATA}}");
    let (head, tail) = (fill(head), fill(tail));
    out.write_all(head.as_bytes())?;
    {
        let mut w = NoLt(out);
        let sets: Vec<Value> = datasets
            .iter()
            .map(|d| {
                json!({"name": d.name, "inputs": d.inputs, "overview": d.overview,
                       "embedded": d.rows.len(), "viewable": d.viewable})
            })
            .collect();
        w.write_all(b"{\"meta\":")?;
        serde_json::to_writer(&mut w, meta)?;
        w.write_all(b",\"datasets\":")?;
        serde_json::to_writer(&mut w, &sets)?;
        w.write_all(b",\"figures\":")?;
        serde_json::to_writer(&mut w, figs)?;
        w.write_all(b",\"rows\":[")?;
        let mut first = true;
        for (i, d) in datasets.iter().enumerate() {
            for r in &d.rows {
                if !first {
                    w.write_all(b",\n")?;
                }
                first = false;
                let mut r = r.clone();
                r["d"] = i.into();
                serde_json::to_writer(&mut w, &r)?;
            }
        }
        w.write_all(b"]}")?;
    }
    out.write_all(tail.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_text_ends_the_data_block() {
        let mut v = Vec::new();
        NoLt(&mut v).write_all(br#"{"x":"</script><b>"}"#).unwrap();
        assert_eq!(v, br#"{"x":"\u003c/script>\u003cb>"}"#);
        let back: Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(back["x"], "</script><b>");
        assert_eq!(html_escape("a<b>&\""), "a&lt;b&gt;&amp;&quot;");
    }
}
