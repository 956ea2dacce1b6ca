//! The rows of a Parquet file traj wrote (schema version 2) as JSON lines: each row an
//! object of its non-null columns in column order, JSON-text columns
//! ([`super::shape::JSON_KEY`]) put in as the JSON they hold, a null member written as
//! `null` where the field says nulls were written ([`super::shape::NULL_KEY`]) and left
//! out elsewhere.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, OffsetSizeTrait, RecordBatch};
use arrow_schema::{DataType, Field};

use super::shape::{JSON_KEY, NULL_KEY};

fn is_null(a: &dyn Array, i: usize) -> bool {
    a.data_type() == &DataType::Null || a.is_null(i)
}

/// Append the rows of `batch` to `out`, one line each.
pub fn rows(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), String> {
    let schema = batch.schema();
    for i in 0..batch.num_rows() {
        members(
            schema.fields().iter().map(|f| f.as_ref()),
            batch.columns().iter().map(|c| c.as_ref()),
            i,
            out,
        )?;
        out.push(b'\n');
    }
    Ok(())
}

fn members<'a>(
    fields: impl Iterator<Item = &'a Field>,
    cols: impl Iterator<Item = &'a dyn Array>,
    i: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.push(b'{');
    let mut first = true;
    for (f, c) in fields.zip(cols) {
        let null = is_null(c, i);
        if null && !f.metadata().contains_key(NULL_KEY) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, f.name()).expect("write to a Vec");
        out.push(b':');
        if null {
            out.extend_from_slice(b"null");
        } else {
            value(f, c, i, out)?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// Append value `i` of `a` (not null), of field `f`.
fn value(f: &Field, a: &dyn Array, i: usize, out: &mut Vec<u8>) -> Result<(), String> {
    macro_rules! num {
        ($t:ty) => {
            serde_json::to_writer(&mut *out, &a.as_primitive::<$t>().value(i))
                .expect("write to a Vec")
        };
    }
    if f.metadata().contains_key(JSON_KEY) {
        let text = match a.data_type() {
            DataType::Utf8 => a.as_string::<i32>().value(i),
            DataType::LargeUtf8 => a.as_string::<i64>().value(i),
            t => return Err(format!("{}: JSON text in a {t} column", f.name())),
        };
        serde_json::from_str::<serde::de::IgnoredAny>(text)
            .map_err(|e| format!("{}: not JSON: {e}", f.name()))?;
        out.extend_from_slice(text.as_bytes());
        return Ok(());
    }
    let w = |out: &mut Vec<u8>, s: &str| serde_json::to_writer(out, s).expect("write to a Vec");
    match a.data_type() {
        DataType::Boolean => {
            let b = a.as_boolean().value(i);
            out.extend_from_slice(if b { b"true" } else { b"false" });
        }
        DataType::Int8 => num!(Int8Type),
        DataType::Int16 => num!(Int16Type),
        DataType::Int32 => num!(Int32Type),
        DataType::Int64 => num!(Int64Type),
        DataType::UInt8 => num!(UInt8Type),
        DataType::UInt16 => num!(UInt16Type),
        DataType::UInt32 => num!(UInt32Type),
        DataType::UInt64 => num!(UInt64Type),
        DataType::Float32 => num!(Float32Type),
        DataType::Float64 => num!(Float64Type),
        DataType::Utf8 => w(out, a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => w(out, a.as_string::<i64>().value(i)),
        DataType::List(item) => list::<i32>(item, a, i, out)?,
        DataType::LargeList(item) => list::<i64>(item, a, i, out)?,
        DataType::Struct(fields) => {
            let s = a.as_struct();
            members(
                fields.iter().map(|f| f.as_ref()),
                s.columns().iter().map(|c| c.as_ref()),
                i,
                out,
            )?;
        }
        t => return Err(format!("{}: type {t} is not written by traj", f.name())),
    }
    Ok(())
}

fn list<O: OffsetSizeTrait>(
    item: &Field,
    a: &dyn Array,
    i: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let l = a.as_list::<O>();
    let items = l.values();
    let offsets = l.value_offsets();
    let (start, end) = (offsets[i].as_usize(), offsets[i + 1].as_usize());
    out.push(b'[');
    for k in start..end {
        if k > start {
            out.push(b',');
        }
        if is_null(items.as_ref(), k) {
            out.extend_from_slice(b"null");
        } else {
            value(item, items.as_ref(), k, out)?;
        }
    }
    out.push(b']');
    Ok(())
}
