//! A row group's values as Arrow arrays of the columns [`super::shape`] chose: each
//! column built from the JSON values at its path (absent and `null` are both null).

use std::sync::Arc;

use arrow_array::types::{
    ArrowPrimitiveType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    ArrayRef, BooleanArray, GenericListArray, LargeStringArray, NullArray, OffsetSizeTrait,
    PrimitiveArray, StringArray, StructArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields};
use serde_json::Value;

use super::shape::JSON_KEY;

/// A value of the column, `None` for absent or `null` (a JSON-text column of the top
/// level keeps a `null` as `Some`, [`columns`]).
type Cell<'a> = Option<&'a Value>;

fn cell(v: Option<&Value>) -> Cell<'_> {
    v.filter(|v| !v.is_null())
}

/// The array of `field` holding `vals` (one per row); `path` names it in errors.
pub fn array(field: &Field, vals: &[Cell<'_>], path: &str) -> Result<ArrayRef, String> {
    if field.metadata().contains_key(JSON_KEY) {
        let text: Vec<Option<String>> = vals
            .iter()
            .map(|v| v.map(|v| serde_json::to_string(v).expect("a Value serialises")))
            .collect();
        // A JSON column of the input in large strings stays large (shape::json_storage).
        return Ok(match field.data_type() {
            DataType::LargeUtf8 => Arc::new(LargeStringArray::from(text)),
            _ => Arc::new(StringArray::from(text)),
        });
    }
    let wrong = |v: &Value| format!("{path}: {v} is not {}", field.data_type());
    macro_rules! prim {
        ($t:ty, $get:expr) => {{
            let mut out = Vec::with_capacity(vals.len());
            for v in vals {
                out.push(match v {
                    None => None,
                    Some(v) => Some($get(v).ok_or_else(|| wrong(v))?),
                });
            }
            Ok(Arc::new(PrimitiveArray::<$t>::from(out)))
        }};
    }
    fn int<T: ArrowPrimitiveType>(v: &Value) -> Option<T::Native>
    where
        T::Native: TryFrom<i64>,
    {
        v.as_i64().and_then(|i| T::Native::try_from(i).ok())
    }
    let float = |v: &Value| match v {
        Value::Number(n) => n.to_string().parse::<f64>().ok(),
        _ => None,
    };
    let float32 = |v: &Value| match v {
        Value::Number(n) => n.to_string().parse::<f32>().ok(),
        _ => None,
    };
    match field.data_type() {
        DataType::Null => match vals.iter().flatten().next() {
            Some(v) => Err(wrong(v)),
            None => Ok(Arc::new(NullArray::new(vals.len()))),
        },
        DataType::Boolean => {
            let mut out = Vec::with_capacity(vals.len());
            for v in vals {
                out.push(match v {
                    None => None,
                    Some(v) => Some(v.as_bool().ok_or_else(|| wrong(v))?),
                });
            }
            Ok(Arc::new(BooleanArray::from(out)))
        }
        DataType::Int8 => prim!(Int8Type, int::<Int8Type>),
        DataType::Int16 => prim!(Int16Type, int::<Int16Type>),
        DataType::Int32 => prim!(Int32Type, int::<Int32Type>),
        DataType::Int64 => prim!(Int64Type, int::<Int64Type>),
        DataType::UInt8 => prim!(UInt8Type, int::<UInt8Type>),
        DataType::UInt16 => prim!(UInt16Type, int::<UInt16Type>),
        DataType::UInt32 => prim!(UInt32Type, int::<UInt32Type>),
        DataType::UInt64 => prim!(UInt64Type, int::<UInt64Type>),
        DataType::Float32 => prim!(Float32Type, float32),
        DataType::Float64 => prim!(Float64Type, float),
        DataType::Utf8 => {
            let s = strings(vals, &wrong)?;
            Ok(Arc::new(StringArray::from(s)))
        }
        DataType::LargeUtf8 => {
            let s = strings(vals, &wrong)?;
            Ok(Arc::new(LargeStringArray::from(s)))
        }
        DataType::List(item) => list::<i32>(item, vals, path, &wrong),
        DataType::LargeList(item) => list::<i64>(item, vals, path, &wrong),
        DataType::Struct(fields) => structs(fields, vals, path, &wrong),
        other => Err(format!("{path}: type {other} is not written by traj")),
    }
}

fn strings<'a>(
    vals: &[Cell<'a>],
    wrong: &dyn Fn(&Value) -> String,
) -> Result<Vec<Option<&'a str>>, String> {
    vals.iter()
        .map(|v| match v {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| wrong(v)),
        })
        .collect()
}

fn nulls(vals: &[Cell<'_>]) -> Option<NullBuffer> {
    let n = NullBuffer::from(vals.iter().map(Option::is_some).collect::<Vec<bool>>());
    (n.null_count() > 0).then_some(n)
}

fn list<O: OffsetSizeTrait>(
    item: &FieldRef,
    vals: &[Cell<'_>],
    path: &str,
    wrong: &dyn Fn(&Value) -> String,
) -> Result<ArrayRef, String> {
    let mut lens = Vec::with_capacity(vals.len());
    let mut items = Vec::new();
    for v in vals {
        match v {
            None => lens.push(0),
            Some(Value::Array(a)) => {
                lens.push(a.len());
                items.extend(a.iter().map(|x| cell(Some(x))));
            }
            Some(v) => return Err(wrong(v)),
        }
    }
    let child = array(item, &items, &format!("{path}[]"))?;
    let offsets = OffsetBuffer::<O>::from_lengths(lens);
    GenericListArray::<O>::try_new(item.clone(), offsets, child, nulls(vals))
        .map(|a| Arc::new(a) as ArrayRef)
        .map_err(|e| format!("{path}: {e}"))
}

fn structs(
    fields: &Fields,
    vals: &[Cell<'_>],
    path: &str,
    wrong: &dyn Fn(&Value) -> String,
) -> Result<ArrayRef, String> {
    let mut objs = Vec::with_capacity(vals.len());
    for v in vals {
        match v {
            None => objs.push(None),
            Some(Value::Object(o)) => objs.push(Some(o)),
            Some(v) => return Err(wrong(v)),
        }
    }
    let mut children = Vec::with_capacity(fields.len());
    for f in fields.iter() {
        let col: Vec<Cell<'_>> = objs
            .iter()
            .map(|o| cell(o.and_then(|o| o.get(f.name()))))
            .collect();
        children.push(array(f, &col, &format!("{path}.{}", f.name()))?);
    }
    StructArray::try_new(fields.clone(), children, nulls(vals))
        .map(|a| Arc::new(a) as ArrayRef)
        .map_err(|e| format!("{path}: {e}"))
}

/// The columns of `rows` (each a JSON object). A JSON-text column holds a member
/// written as `null` as the text `null`, and a missing one as a null.
pub fn columns(fields: &Fields, rows: &[Value]) -> Result<Vec<ArrayRef>, String> {
    fields
        .iter()
        .map(|f| {
            let col: Vec<Cell<'_>> = if f.metadata().contains_key(JSON_KEY) {
                rows.iter().map(|r| r.get(f.name())).collect()
            } else {
                rows.iter().map(|r| cell(r.get(f.name()))).collect()
            };
            array(f, &col, f.name())
        })
        .collect()
}
