//! Parquet in and out, so that every stage reads the Hub's files and writes files that
//! `datasets`, pyarrow and Spark read as columns (format: docs/formats.md).
//!
//! Reading ([`lines_of_parquet`]): a Parquet file (found by its `PAR1` magic bytes,
//! whatever its name) becomes JSONL, one row group batch at a time (bounded memory).
//! A file traj wrote gives back its rows ([`text`]; a file of traj's first schema:
//! [`v1`]); any other file's rows are turned into JSON by arrow-json (nested lists and
//! structs included; null fields left out; a JSON column's values as the JSON they hold:
//! [`foreign`]). The schema of every Parquet file read is
//! remembered for the life of the process ([`input_columns`]), so that a Parquet output
//! keeps its input's column types.
//!
//! Writing ([`ParquetSink`]): each row's members become columns. The rows are spooled
//! to a temp file while their types are gathered ([`shape`]); at the end each column
//! gets the type of its values (the input's type when it had one that still fits, a
//! JSON column of the input, `datasets` 5's `Json()`, staying one; else the one the
//! values agree on, else JSON text named in the field's metadata),
//! and the rows are written from the spool, one row group at a time ([`build`]).

mod build;
mod foreign;
mod shape;
mod text;
mod v1;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::{Field, Schema, SchemaRef};

use super::pieces::{PieceReader, Pieces};

/// The magic bytes a Parquet file starts (and ends) with.
pub const MAGIC: &[u8; 4] = b"PAR1";
/// Schema metadata key that marks a file traj wrote, and its schema version.
const SCHEMA_KEY: &str = "traj.schema";
/// Schema metadata key listing the JSON-text paths (a JSON array of `a.b[].c` paths).
const JSON_FIELDS_KEY: &str = "traj.json_fields";
/// Rows per batch read (256: a batch of long rows stays in tens of MB; 1024 held twice the
/// memory and was no faster: BENCHMARKS.md bench:formats); a row group written closes at
/// 8192 rows or 64 MiB of row text,
/// whichever comes first, so that memory stays bounded on long rows (BENCHMARKS.md
/// bench:formats measures the choice).
const BATCH_ROWS: usize = 256;
const ROW_GROUP_ROWS: usize = 8192;
const ROW_GROUP_BYTES: usize = 64 << 20;

fn parquet_err(name: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{name}: Parquet: {e}"))
}

/// The schemas of the Parquet files read by this process, in the order they were opened.
static INPUTS: Mutex<Vec<SchemaRef>> = Mutex::new(Vec::new());

/// The top-level columns of the Parquet files read so far, by name (the first file
/// that has a column gives its type).
pub fn input_columns() -> HashMap<String, Field> {
    let inputs = INPUTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut cols = HashMap::new();
    for s in inputs.iter() {
        for f in s.fields() {
            cols.entry(f.name().clone())
                .or_insert_with(|| f.as_ref().clone());
        }
    }
    cols
}

/// Which reader a file's rows need.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// traj's first schema (`conversations` + `row`).
    V1,
    /// traj's typed columns.
    V2,
    /// Any other file: arrow-json.
    Foreign,
}

/// The rows of the Parquet file `f` as JSONL.
pub fn lines_of_parquet(f: File, name: String) -> Result<Box<dyn BufRead + Send>> {
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| parquet_err(&name, e))?;
    let schema = builder.schema().clone();
    let kind = match schema.metadata().get(SCHEMA_KEY).map(String::as_str) {
        Some("1") => Kind::V1,
        Some("2") => Kind::V2,
        _ => Kind::Foreign,
    };
    INPUTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(schema);
    let batches = builder
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| parquet_err(&name, e))?;
    Ok(Box::new(PieceReader::new(ParquetLines {
        batches,
        kind,
        name,
        rows: 0,
    })))
}

struct ParquetLines {
    batches: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    kind: Kind,
    name: String,
    /// Rows given out so far (for messages).
    rows: usize,
}

impl ParquetLines {
    fn refill(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        while out.is_empty() {
            let Some(batch) = self.batches.next() else {
                return Ok(false);
            };
            let batch = batch.map_err(|e| parquet_err(&self.name, e))?;
            match self.kind {
                Kind::V1 => {
                    v1::rows(&batch, self.rows, out).map_err(|e| parquet_err(&self.name, e))?
                }
                Kind::V2 => text::rows(&batch, out).map_err(|e| {
                    parquet_err(&self.name, format!("rows from {}: {e}", self.rows + 1))
                })?,
                Kind::Foreign => {
                    foreign::rows(&batch, out).map_err(|e| parquet_err(&self.name, e))?
                }
            }
            self.rows += batch.num_rows();
        }
        Ok(true)
    }
}

impl Pieces for ParquetLines {
    fn next_piece(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        self.refill(out)
    }
}

/// Writes the JSONL written to it as a Parquet file of typed columns (the module
/// documentation), one row group per 8192 rows or 64 MiB of rows, zstd-compressed.
/// Nothing reaches `W` before [`ParquetSink::finish`]: the rows wait in a temp file.
pub struct ParquetSink<W: Write + Send> {
    out: W,
    spool: BufWriter<File>,
    pending: Vec<u8>,
    root: shape::Node,
    row_group_bytes: usize,
    /// Column types to keep where they fit (`None`: those of the Parquet inputs).
    hint: Option<HashMap<String, Field>>,
    /// Rows written so far (for messages).
    count: u64,
}

impl<W: Write + Send> ParquetSink<W> {
    pub fn new(w: W) -> io::Result<ParquetSink<W>> {
        Self::with_options(w, ROW_GROUP_BYTES, None)
    }

    fn with_options(
        out: W,
        row_group_bytes: usize,
        hint: Option<HashMap<String, Field>>,
    ) -> io::Result<ParquetSink<W>> {
        let spool = tempfile::tempfile()
            .map_err(|e| io::Error::new(e.kind(), format!("Parquet output: temp file: {e}")))?;
        Ok(ParquetSink {
            out,
            spool: BufWriter::with_capacity(1 << 20, spool),
            pending: Vec::new(),
            root: shape::Node::default(),
            row_group_bytes,
            hint,
            count: 0,
        })
    }

    fn bad(row: u64, what: impl std::fmt::Display) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("output row {row}: cannot be written as Parquet: {what}"),
        )
    }

    fn add_line(&mut self, line: &[u8]) -> io::Result<()> {
        self.count += 1;
        let v: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| Self::bad(self.count, e))?;
        if !v.is_object() {
            return Err(Self::bad(self.count, "not a JSON object"));
        }
        self.root.see(&v);
        self.spool.write_all(line)?;
        self.spool.write_all(b"\n")
    }

    /// Write the rows and the footer; gives back the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.add_line(&line)?;
        }
        let hint = self.hint.take().unwrap_or_else(input_columns);
        let fields = self.root.columns(&hint);
        if fields.is_empty() && self.count > 0 {
            return Err(Self::bad(
                self.count,
                "the rows have no members, so no column holds them (write JSONL)",
            ));
        }
        let mut json_paths = Vec::new();
        for f in fields.iter() {
            shape::json_paths(f, f.name(), &mut json_paths);
        }
        let schema = Arc::new(Schema::new(fields).with_metadata(HashMap::from([
            (SCHEMA_KEY.to_string(), "2".to_string()),
            (
                JSON_FIELDS_KEY.to_string(),
                serde_json::to_string(&json_paths).expect("strings serialise"),
            ),
        ])));
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(
                parquet::basic::ZstdLevel::try_new(3).expect("level 3 is valid"),
            ))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut self.out, schema.clone(), Some(props))
                .map_err(|e| parquet_err("output", e))?;
        let mut spool = self
            .spool
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|mut f| f.rewind().map(|()| f))?;
        let mut spool = BufReader::with_capacity(1 << 20, &mut spool);
        let mut line = Vec::new();
        let mut rows = Vec::new();
        let (mut bytes, mut row) = (0usize, 0u64);
        loop {
            line.clear();
            let eof = spool.read_until(b'\n', &mut line)? == 0;
            if !eof {
                row += 1;
                let v = serde_json::from_slice(&line).map_err(|e| Self::bad(row, e))?;
                rows.push(v);
                bytes += line.len();
            }
            let full = rows.len() >= ROW_GROUP_ROWS || bytes >= self.row_group_bytes;
            if !rows.is_empty() && (eof || full) {
                let cols = build::columns(schema.fields(), &rows)
                    .map_err(|e| Self::bad(row + 1 - rows.len() as u64, e))?;
                let opts = RecordBatchOptions::new().with_row_count(Some(rows.len()));
                let batch = RecordBatch::try_new_with_options(schema.clone(), cols, &opts)
                    .map_err(|e| parquet_err("output", e))?;
                writer.write(&batch).map_err(|e| parquet_err("output", e))?;
                // One batch, one row group: the writer would otherwise keep adding
                // batches to the open row group until it holds 8192 rows.
                writer.flush().map_err(|e| parquet_err("output", e))?;
                rows.clear();
                bytes = 0;
            }
            if eof {
                break;
            }
        }
        writer.close().map_err(|e| parquet_err("output", e))?;
        Ok(self.out)
    }
}

impl<W: Write + Send> Write for ParquetSink<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut start = 0;
        let pending = std::mem::take(&mut self.pending);
        while let Some(k) = memchr::memchr(b'\n', &pending[start..]) {
            self.add_line(&pending[start..start + k])?;
            start += k + 1;
        }
        self.pending = pending[start..].to_vec();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// True when `head` (the first bytes of a file) starts a Parquet file.
pub fn is_parquet(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// Spool a non-seekable Parquet stream (stdin) to a temp file to read it.
pub fn spool(mut r: impl Read, name: &str) -> Result<File> {
    let mut f = tempfile::tempfile().context("cannot create a temp file for Parquet input")?;
    io::copy(&mut r, &mut f).with_context(|| format!("{name}: read error"))?;
    io::Seek::rewind(&mut f)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(rows: &str, group_bytes: usize) -> (tempfile::TempDir, std::path::PathBuf) {
        let mut sink =
            ParquetSink::with_options(Vec::new(), group_bytes, Some(HashMap::new())).unwrap();
        sink.write_all(rows.as_bytes()).unwrap();
        let bytes = sink.finish().unwrap();
        assert!(is_parquet(&bytes));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.parquet");
        std::fs::write(&p, &bytes).unwrap();
        (d, p)
    }

    fn read(p: &std::path::Path) -> String {
        let mut back = String::new();
        lines_of_parquet(File::open(p).unwrap(), "x".into())
            .unwrap()
            .read_to_string(&mut back)
            .unwrap();
        back
    }

    #[test]
    fn rows_round_trip_by_value() {
        let rows = concat!(
            "{\"id\":1.10,\"conversations\":[{\"from\":\"human\",\"value\":\"hi \\u00e9\"},{\"from\":\"gpt\",\"value\":\"yo\"}],\"n\":123456789012345678901234567890,\"o\":{\"a\":null,\"b\":[1,2]}}\n",
            "{\"id\":2,\"other\":[1,2,{\"a\":null}],\"n\":1,\"o\":{\"a\":\"x\",\"b\":[]}}\n",
            "{\"conversations\":[],\"x\":\"\",\"o\":null}\n",
        );
        let (_d, p) = write(rows, ROW_GROUP_BYTES);
        // Numbers by value (1.10 is the double 1.1), the wide integer as written (its
        // column is JSON text), strings as serde_json writes them, members in column
        // order, absent members left out, written nulls kept.
        let want = concat!(
            "{\"id\":1.1,\"conversations\":[{\"from\":\"human\",\"value\":\"hi é\"},{\"from\":\"gpt\",\"value\":\"yo\"}],\"n\":123456789012345678901234567890,\"o\":{\"a\":null,\"b\":[1,2]}}\n",
            "{\"id\":2.0,\"n\":1,\"o\":{\"a\":\"x\",\"b\":[]},\"other\":[1,2,{\"a\":null}]}\n",
            "{\"conversations\":[],\"o\":null,\"x\":\"\"}\n",
        );
        assert_eq!(read(&p), want);
        let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            File::open(&p).unwrap(),
        )
        .unwrap();
        let json = b.schema().metadata().get(JSON_FIELDS_KEY).cloned();
        assert_eq!(json.as_deref(), Some("[\"n\",\"other[]\"]"));
    }

    #[test]
    fn a_member_null_in_one_row_and_missing_in_another_reads_back_so() {
        let rows = "{\"a\":null,\"b\":1}\n{\"b\":2}\n{\"a\":[1],\"b\":3}\n";
        let (_d, p) = write(rows, ROW_GROUP_BYTES);
        assert_eq!(read(&p), rows);
    }

    #[test]
    fn long_rows_close_a_row_group_by_bytes() {
        let row = format!(
            "{{\"conversations\":[{{\"from\":\"human\",\"value\":\"{}\"}}]}}\n",
            "x".repeat(1000)
        );
        let rows = row.repeat(10);
        let (_d, p) = write(&rows, 3000);
        let meta = parquet::file::reader::SerializedFileReader::new(File::open(&p).unwrap());
        let groups: Vec<i64> = parquet::file::reader::FileReader::metadata(&meta.unwrap())
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, [3, 3, 3, 1]);
        assert_eq!(read(&p), rows);
    }

    #[test]
    fn no_rows_and_empty_rows_make_a_file() {
        let (_d, p) = write("", ROW_GROUP_BYTES);
        assert_eq!(read(&p), "");
        // Rows without members have no column to hold them: refused, not lost.
        let mut sink = ParquetSink::new(Vec::new()).unwrap();
        sink.write_all(b"{}\n{}\n").unwrap();
        let e = sink.finish().unwrap_err();
        assert!(e.to_string().contains("no members"), "{e}");
    }

    /// A column of an input's JSON type (`datasets` 5's `Json()`, a list of them for
    /// `messages`) is written with Parquet's `JSON` logical type and the `arrow.json`
    /// extension, so that `datasets` 5 loads it as `Json()` again, even where the values
    /// would have a type of their own; every other column is as before.
    #[test]
    fn a_json_column_of_the_input_is_written_as_one() {
        use arrow_schema::DataType;
        use arrow_schema::extension::Json;
        let json =
            || Field::new("element", DataType::Utf8, true).with_extension_type(Json::default());
        let hint: HashMap<String, Field> = [
            Field::new("id", DataType::Int64, true),
            Field::new("messages", DataType::List(Arc::new(json())), true),
            json().with_name("extra"),
            json().with_name("gone"),
        ]
        .into_iter()
        .map(|f| (f.name().clone(), f))
        .collect();
        let rows = concat!(
            "{\"id\":1,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"extra\":{\"a\":1},\"s\":\"x\"}\n",
            "{\"id\":2,\"messages\":[{\"role\":\"user\",\"content\":\"r\"}],\"extra\":null,\"s\":\"y\"}\n",
        );
        let mut sink = ParquetSink::with_options(Vec::new(), ROW_GROUP_BYTES, Some(hint)).unwrap();
        sink.write_all(rows.as_bytes()).unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.parquet");
        std::fs::write(&p, sink.finish().unwrap()).unwrap();
        let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            File::open(&p).unwrap(),
        )
        .unwrap();
        let schema = b.schema().clone();
        let is_json = |f: &Field| f.extension_type_name() == Some("arrow.json");
        let item = match schema.field_with_name("messages").unwrap().data_type() {
            DataType::List(item) => item.clone(),
            t => panic!("messages: {t}"),
        };
        assert!(is_json(&item), "{item:?}");
        assert!(is_json(schema.field_with_name("extra").unwrap()));
        assert!(!is_json(schema.field_with_name("id").unwrap()));
        assert_eq!(
            schema.field_with_name("id").unwrap().data_type(),
            &DataType::Int64
        );
        assert!(!is_json(schema.field_with_name("s").unwrap()));
        // Parquet's own logical type, which pyarrow and `datasets` read.
        let descr = b.parquet_schema();
        let logical: Vec<(String, Option<parquet::basic::LogicalType>)> = descr
            .columns()
            .iter()
            .map(|c| (c.path().string(), c.logical_type_ref().cloned()))
            .collect();
        use parquet::basic::LogicalType as L;
        assert_eq!(
            logical,
            [
                ("id".to_string(), None),
                ("messages.list.element".to_string(), Some(L::Json)),
                ("extra".to_string(), Some(L::Json)),
                ("s".to_string(), Some(L::String)),
            ]
        );
        assert_eq!(
            schema.metadata().get(JSON_FIELDS_KEY).map(String::as_str),
            Some("[\"messages[]\",\"extra\"]")
        );
        // traj reads its file back as the rows it was given.
        assert_eq!(read(&p), rows);
    }

    #[test]
    fn a_row_that_is_not_an_object_is_named() {
        let mut sink = ParquetSink::new(Vec::new()).unwrap();
        let e = sink.write_all(b"{\"a\":1}\n[1]\n").unwrap_err();
        assert!(e.to_string().contains("output row 2"), "{e}");
    }
}
