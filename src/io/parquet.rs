//! Parquet in and out, so that every stage reads the Hub's files and can write files
//! that `datasets`, pyarrow and Spark read (format: docs/formats.md).
//!
//! Reading ([`lines_of_parquet`]): a Parquet file (found by its `PAR1` magic bytes,
//! whatever its name) becomes JSONL, one row group batch at a time (bounded memory).
//! A file traj wrote gives back its rows as they were; any other file's rows are turned
//! into JSON by arrow-json (nested lists and structs included; null fields left out).
//!
//! Writing ([`ParquetSink`]): the rows of the output, with a fixed schema:
//! `conversations: list<struct<from: string, value: string>>` and `row: string`, the
//! row's JSON text with the value of `conversations` replaced by `null` (every other
//! field's bytes as they were, so numbers and key order survive).

use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::builder::{ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{Array, ListArray, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use serde_json::value::RawValue;

use super::pieces::{PieceReader, Pieces};

/// The magic bytes a Parquet file starts (and ends) with.
pub const MAGIC: &[u8; 4] = b"PAR1";
/// Schema metadata key that marks a file traj wrote, and its schema version.
const SCHEMA_KEY: &str = "traj.schema";
/// Rows per batch read (256: a batch of long rows stays in tens of MB; 1024 held twice the
/// memory and was no faster: BENCHMARKS.md bench:formats); a row group written closes at
/// 8192 rows or 64 MiB of row text,
/// whichever comes first, so that memory stays bounded on long rows (BENCHMARKS.md
/// bench:formats measures the choice).
const BATCH_ROWS: usize = 256;
const ROW_GROUP_ROWS: usize = 8192;
const ROW_GROUP_BYTES: usize = 64 << 20;

/// A turn as the Parquet schema holds it.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    from: String,
    value: String,
}

fn turn_fields() -> Fields {
    Fields::from(vec![
        Field::new("from", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, false),
    ])
}

/// The schema of the files traj writes.
fn schema() -> Schema {
    let list = DataType::List(Arc::new(Field::new(
        "item",
        DataType::Struct(turn_fields()),
        true,
    )));
    Schema::new(vec![
        Field::new("conversations", list, true),
        Field::new("row", DataType::Utf8, false),
    ])
    .with_metadata(std::collections::HashMap::from([(
        SCHEMA_KEY.to_string(),
        "1".to_string(),
    )]))
}

fn parquet_err(name: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{name}: Parquet: {e}"))
}

/// The rows of the Parquet file `f` as JSONL.
pub fn lines_of_parquet(f: File, name: String) -> Result<Box<dyn BufRead + Send>> {
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| parquet_err(&name, e))?;
    let ours = builder
        .schema()
        .metadata()
        .get(SCHEMA_KEY)
        .map(String::as_str)
        == Some("1");
    let batches = builder
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| parquet_err(&name, e))?;
    Ok(Box::new(PieceReader::new(ParquetLines {
        batches,
        ours,
        name,
        rows: 0,
    })))
}

struct ParquetLines {
    batches: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    ours: bool,
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
            if self.ours {
                rows_of_ours(&batch, self.rows, out).map_err(|e| parquet_err(&self.name, e))?;
            } else {
                let mut w = arrow_json::LineDelimitedWriter::new(&mut *out);
                w.write(&batch).map_err(|e| parquet_err(&self.name, e))?;
                w.finish().map_err(|e| parquet_err(&self.name, e))?;
            }
            self.rows += batch.num_rows();
        }
        Ok(true)
    }
}

/// What is wrong with a file that says it is traj's (its schema metadata) but is not.
#[derive(Debug, thiserror::Error)]
enum NotOurs {
    #[error("no {0} column of the expected type")]
    Column(&'static str),
    #[error("conversations is not a list of structs")]
    Turns,
    #[error("turns have no string {0}")]
    TurnField(&'static str),
    #[error("row {row}: {source}")]
    Row {
        row: usize,
        source: serde_json::Error,
    },
}

/// The rows of a batch of a file traj wrote.
/// `before`: the file's rows before this batch (for messages).
fn rows_of_ours(batch: &RecordBatch, before: usize, out: &mut Vec<u8>) -> Result<(), NotOurs> {
    let conv = batch
        .column_by_name("conversations")
        .and_then(|c| c.as_any().downcast_ref::<ListArray>())
        .ok_or(NotOurs::Column("conversations"))?;
    let rows = batch
        .column_by_name("row")
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or(NotOurs::Column("row"))?;
    for i in 0..batch.num_rows() {
        let row: indexmap::IndexMap<String, &RawValue> = serde_json::from_str(rows.value(i))
            .map_err(|source| NotOurs::Row {
                row: before + i + 1,
                source,
            })?;
        let mut turns = Vec::new();
        if conv.is_valid(i) {
            let list = conv.value(i);
            let s = list
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or(NotOurs::Turns)?;
            let col = |n: &'static str| {
                s.column_by_name(n)
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                    .ok_or(NotOurs::TurnField(n))
            };
            let (from, value) = (col("from")?, col("value")?);
            for k in 0..s.len() {
                turns.push(Turn {
                    from: from.value(k).to_string(),
                    value: value.value(k).to_string(),
                });
            }
        }
        let turns_json = serde_json::to_string(&turns).expect("strings serialise");
        let turns_raw = RawValue::from_string(turns_json).expect("valid JSON");
        out.push(b'{');
        for (k, (key, v)) in row.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut *out, key).expect("write to Vec");
            out.push(b':');
            if key == "conversations" && conv.is_valid(i) {
                out.extend_from_slice(turns_raw.get().as_bytes());
            } else {
                out.extend_from_slice(v.get().as_bytes());
            }
        }
        out.extend_from_slice(b"}\n");
    }
    Ok(())
}

impl Pieces for ParquetLines {
    fn next_piece(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        self.refill(out)
    }
}

/// Writes the JSONL written to it as a Parquet file (schema: the module documentation),
/// one row group per 8192 rows or 64 MiB of rows, zstd-compressed.
pub struct ParquetSink<W: Write + Send> {
    writer: Option<parquet::arrow::ArrowWriter<W>>,
    schema: Arc<Schema>,
    pending: Vec<u8>,
    conversations: ListBuilder<StructBuilder>,
    rows: StringBuilder,
    buffered: usize,
    buffered_bytes: usize,
    row_group_bytes: usize,
    /// Rows written so far (for messages).
    count: u64,
}

impl<W: Write + Send> ParquetSink<W> {
    pub fn new(w: W) -> io::Result<ParquetSink<W>> {
        Self::with_row_group_bytes(w, ROW_GROUP_BYTES)
    }

    fn with_row_group_bytes(w: W, row_group_bytes: usize) -> io::Result<ParquetSink<W>> {
        let schema = Arc::new(schema());
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(
                parquet::basic::ZstdLevel::try_new(3).expect("level 3 is valid"),
            ))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let writer = parquet::arrow::ArrowWriter::try_new(w, schema.clone(), Some(props))
            .map_err(|e| parquet_err("output", e))?;
        Ok(ParquetSink {
            writer: Some(writer),
            schema,
            pending: Vec::new(),
            conversations: new_list_builder(),
            rows: StringBuilder::new(),
            buffered: 0,
            buffered_bytes: 0,
            row_group_bytes,
            count: 0,
        })
    }

    fn add_line(&mut self, line: &[u8]) -> io::Result<()> {
        self.count += 1;
        let bad = |what: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "output row {}: cannot be written as Parquet: {what}",
                    self.count
                ),
            )
        };
        let text = std::str::from_utf8(line).map_err(|e| bad(e.to_string()))?;
        let mut row: indexmap::IndexMap<String, &RawValue> =
            serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        match row.get_mut("conversations") {
            Some(raw) => {
                let turns: Vec<Turn> = serde_json::from_str(raw.get())
                    .map_err(|e| bad(format!("conversations: {e}")))?;
                let list = self.conversations.values();
                for t in &turns {
                    field::<StringBuilder>(list, 0).append_value(&t.from);
                    field::<StringBuilder>(list, 1).append_value(&t.value);
                    list.append(true);
                }
                self.conversations.append(true);
                *raw = null_raw();
            }
            None => self.conversations.append(false),
        }
        let rest = serde_json::to_string(&row).map_err(|e| bad(e.to_string()))?;
        self.rows.append_value(rest);
        self.buffered += 1;
        self.buffered_bytes += line.len();
        if self.buffered >= ROW_GROUP_ROWS || self.buffered_bytes >= self.row_group_bytes {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> io::Result<()> {
        if self.buffered == 0 {
            return Ok(());
        }
        let batch = RecordBatch::try_new(
            self.schema.clone(),
            vec![
                Arc::new(self.conversations.finish()),
                Arc::new(self.rows.finish()),
            ],
        )
        .map_err(|e| parquet_err("output", e))?;
        self.buffered = 0;
        self.buffered_bytes = 0;
        let w = self.writer.as_mut().expect("open until finish");
        w.write(&batch).map_err(|e| parquet_err("output", e))?;
        // One batch, one row group: the writer would otherwise keep adding batches to the
        // open row group until it holds 8192 rows, however long they are.
        w.flush().map_err(|e| parquet_err("output", e))?;
        Ok(())
    }

    /// Write what is left and the footer; gives back the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.add_line(&line)?;
        }
        self.flush_batch()?;
        let w = self.writer.take().expect("open until finish");
        w.into_inner().map_err(|e| parquet_err("output", e))
    }
}

fn null_raw() -> &'static RawValue {
    static NULL: std::sync::OnceLock<Box<RawValue>> = std::sync::OnceLock::new();
    NULL.get_or_init(|| RawValue::from_string("null".into()).expect("null is JSON"))
}

fn new_list_builder() -> ListBuilder<StructBuilder> {
    let fields = turn_fields();
    let s = StructBuilder::new(
        fields.clone(),
        vec![
            Box::new(StringBuilder::new()),
            Box::new(StringBuilder::new()),
        ],
    );
    ListBuilder::new(s).with_field(Arc::new(Field::new("item", DataType::Struct(fields), true)))
}

fn field<T: arrow_array::builder::ArrayBuilder>(s: &mut StructBuilder, i: usize) -> &mut T {
    s.field_builder::<T>(i).expect("the schema's builders")
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

    #[test]
    fn rows_round_trip_exactly() {
        let rows = concat!(
            "{\"id\":1.10,\"conversations\":[{\"from\":\"human\",\"value\":\"hi \\u00e9\"},{\"from\":\"gpt\",\"value\":\"yo\"}],\"n\":123456789012345678901234567890}\n",
            "{\"other\":[1,2,{\"a\":null}]}\n",
            "{\"conversations\":[],\"x\":\"\"}\n",
        );
        let mut sink = ParquetSink::new(Vec::new()).unwrap();
        sink.write_all(rows.as_bytes()).unwrap();
        let bytes = sink.finish().unwrap();
        assert!(is_parquet(&bytes));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.parquet");
        std::fs::write(&p, &bytes).unwrap();
        let mut back = String::new();
        lines_of_parquet(File::open(&p).unwrap(), "x".into())
            .unwrap()
            .read_to_string(&mut back)
            .unwrap();
        // Every value kept; strings re-escaped as serde_json writes them.
        let want = rows.replace("hi \\u00e9", "hi é");
        assert_eq!(back, want);
    }

    #[test]
    fn long_rows_close_a_row_group_by_bytes() {
        let row = format!(
            "{{\"conversations\":[{{\"from\":\"human\",\"value\":\"{}\"}}]}}\n",
            "x".repeat(1000)
        );
        let rows = row.repeat(10);
        let mut sink = ParquetSink::with_row_group_bytes(Vec::new(), 3000).unwrap();
        sink.write_all(rows.as_bytes()).unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.parquet");
        std::fs::write(&p, sink.finish().unwrap()).unwrap();
        let meta = parquet::file::reader::SerializedFileReader::new(File::open(&p).unwrap());
        let groups: Vec<i64> = parquet::file::reader::FileReader::metadata(&meta.unwrap())
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, [3, 3, 3, 1]);
        let mut back = String::new();
        lines_of_parquet(File::open(&p).unwrap(), "x".into())
            .unwrap()
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, rows);
    }

    #[test]
    fn a_bad_row_in_a_file_that_says_it_is_ours_is_named_by_its_row() {
        let schema = Arc::new(schema());
        let mut turns = new_list_builder();
        turns.append(false);
        turns.append(false);
        let rows = StringArray::from(vec!["{\"a\":1}", "not json"]);
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(turns.finish()), Arc::new(rows)],
        )
        .unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.parquet");
        let mut w =
            parquet::arrow::ArrowWriter::try_new(File::create(&p).unwrap(), schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let mut back = String::new();
        let e = lines_of_parquet(File::open(&p).unwrap(), "x.parquet".into())
            .unwrap()
            .read_to_string(&mut back)
            .unwrap_err();
        assert!(
            e.to_string().starts_with("x.parquet: Parquet: row 2: "),
            "{e}"
        );
    }

    #[test]
    fn a_turn_with_other_keys_is_refused() {
        let mut sink = ParquetSink::new(Vec::new()).unwrap();
        let e = sink
            .write_all(b"{\"conversations\":[{\"from\":\"a\",\"value\":\"b\",\"weight\":1}]}\n")
            .unwrap_err();
        assert!(e.to_string().contains("output row 1"), "{e}");
    }
}
