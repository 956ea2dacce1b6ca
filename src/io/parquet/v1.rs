//! Reading the Parquet files traj wrote before its columns were typed (schema version
//! 1): `conversations: list<struct<from: string, value: string>>` and `row: string`, the
//! row's JSON text with the value of `conversations` replaced by `null`.

use arrow_array::{Array, ListArray, RecordBatch, StringArray, StructArray};
use serde_json::value::RawValue;

/// A turn as version 1 holds it.
#[derive(serde::Serialize)]
struct Turn<'a> {
    from: &'a str,
    value: &'a str,
}

/// What is wrong with a file that says it is traj's version 1 (its schema metadata)
/// but is not.
#[derive(Debug, thiserror::Error)]
pub enum NotOurs {
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

/// The rows of a batch of a version 1 file.
/// `before`: the file's rows before this batch (for messages).
pub fn rows(batch: &RecordBatch, before: usize, out: &mut Vec<u8>) -> Result<(), NotOurs> {
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
        let mut turns_json = String::new();
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
            let turns: Vec<Turn<'_>> = (0..s.len())
                .map(|k| Turn {
                    from: from.value(k),
                    value: value.value(k),
                })
                .collect();
            turns_json = serde_json::to_string(&turns).expect("strings serialise");
        }
        out.push(b'{');
        for (k, (key, v)) in row.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut *out, key).expect("write to Vec");
            out.push(b':');
            if key == "conversations" && conv.is_valid(i) {
                out.extend_from_slice(turns_json.as_bytes());
            } else {
                out.extend_from_slice(v.get().as_bytes());
            }
        }
        out.extend_from_slice(b"}\n");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::Read;
    use std::sync::Arc;

    use arrow_array::builder::{ListBuilder, StringBuilder, StructBuilder};
    use arrow_schema::{DataType, Field, Fields, Schema};

    use super::*;

    fn write_v1(rows: Vec<&str>, turns: Vec<Option<Vec<(&str, &str)>>>) -> tempfile::TempDir {
        let tf = Fields::from(vec![
            Field::new("from", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, false),
        ]);
        let item = Arc::new(Field::new("item", DataType::Struct(tf.clone()), true));
        let schema = Arc::new(
            Schema::new(vec![
                Field::new("conversations", DataType::List(item.clone()), true),
                Field::new("row", DataType::Utf8, false),
            ])
            .with_metadata(std::collections::HashMap::from([(
                "traj.schema".to_string(),
                "1".to_string(),
            )])),
        );
        let s = StructBuilder::new(
            tf,
            vec![
                Box::new(StringBuilder::new()),
                Box::new(StringBuilder::new()),
            ],
        );
        let mut b = ListBuilder::new(s).with_field(item);
        for t in turns {
            match t {
                None => b.append(false),
                Some(t) => {
                    for (f, v) in t {
                        let s = b.values();
                        s.field_builder::<StringBuilder>(0).unwrap().append_value(f);
                        s.field_builder::<StringBuilder>(1).unwrap().append_value(v);
                        s.append(true);
                    }
                    b.append(true);
                }
            }
        }
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(b.finish()), Arc::new(StringArray::from(rows))],
        )
        .unwrap();
        let d = tempfile::tempdir().unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            File::create(d.path().join("x.parquet")).unwrap(),
            schema,
            None,
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        d
    }

    fn read(d: &tempfile::TempDir) -> std::io::Result<String> {
        let mut back = String::new();
        super::super::lines_of_parquet(
            File::open(d.path().join("x.parquet")).unwrap(),
            "x.parquet".into(),
        )
        .unwrap()
        .read_to_string(&mut back)?;
        Ok(back)
    }

    #[test]
    fn a_version_1_file_still_reads_back() {
        let d = write_v1(
            vec![
                "{\"id\":1.10,\"conversations\":null,\"n\":1}",
                "{\"a\":[1]}",
            ],
            vec![Some(vec![("human", "hi")]), None],
        );
        assert_eq!(
            read(&d).unwrap(),
            "{\"id\":1.10,\"conversations\":[{\"from\":\"human\",\"value\":\"hi\"}],\"n\":1}\n{\"a\":[1]}\n"
        );
    }

    #[test]
    fn a_bad_row_in_a_file_that_says_it_is_ours_is_named_by_its_row() {
        let d = write_v1(vec!["{\"a\":1}", "not json"], vec![None, None]);
        let e = read(&d).unwrap_err();
        assert!(
            e.to_string().starts_with("x.parquet: Parquet: row 2: "),
            "{e}"
        );
    }
}
