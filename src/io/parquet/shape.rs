//! The column types of a Parquet file traj writes, derived from the rows themselves
//! (every row, seen once before anything is written), and, for the columns of a
//! Parquet file this process read, that file's own types where the values still fit
//! them.
//!
//! A path (a member, a list's items, a member of those) gets a type when every value
//! at it agrees: `null` with anything; `true`/`false` boolean; integers that fit in 64
//! bits int64; numbers with a fraction or an exponent (and integers of at most 53 bits
//! among them) double, when a double holds each value exactly; strings string; arrays
//! a list of their items' type; objects a struct of their members, when every object
//! at the path has the same keys. Any other path (types that differ, objects whose keys
//! differ or that are empty, a number a double cannot hold) is JSON text, marked in the
//! field's metadata: the rule of HF `datasets` 5's JSON loader, so that both give the
//! same columns. One more, that the JSON loader has not: a member that is `null` in some
//! rows and missing from others is JSON text too (a typed column could not tell them
//! apart).
//!
//! A column of an input's JSON type (Arrow's `arrow.json` extension, Parquet's `JSON`
//! logical type: HF `datasets` 5's `Json()`) stays one whatever its values are (any
//! value fits it): JSON text, marked as traj's and as that type, so that `datasets` 5
//! loads it as `Json()` again (values as dicts, not strings).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::extension::{ExtensionType, Json};
use arrow_schema::{DataType, Field, Fields};
use indexmap::IndexMap;
use serde_json::{Number, Value};

/// Field metadata: the column holds JSON text (one value's compact JSON per row).
pub const JSON_KEY: &str = "traj.json";
/// Field metadata: a null here was written as `null` (never left out), so it is read
/// back as `null`; without it a null member is left out of its object.
pub const NULL_KEY: &str = "traj.null";

/// What is known of the values at one path.
#[derive(Debug, Clone, Default)]
pub struct Node {
    pub kind: Kind,
    /// A `null` was seen here.
    pub null: bool,
    /// An object at the parent path lacked this member.
    pub absent: bool,
}

#[derive(Debug, Clone, Default)]
pub enum Kind {
    /// Nothing but nulls (or nothing at all) yet.
    #[default]
    Null,
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    Float {
        /// Every value is the shortest text of a 32-bit float (a float32 column of the
        /// input may stay one).
        f32_ok: bool,
    },
    Str,
    List(Box<Node>),
    Struct {
        fields: IndexMap<String, Node>,
        objects: u64,
        /// Objects with different keys (or an empty one) were seen.
        keys_vary: bool,
    },
    /// Values that no one type holds: JSON text.
    Json,
}

/// Largest integer a double holds exactly (2^53), and a float32 (2^24).
const F64_INT: i64 = 1 << 53;
const F32_INT: i64 = 1 << 24;

enum Num {
    Int(i64),
    Float {
        f32_ok: bool,
    },
    /// An integer beyond 64 bits, or a number no double holds exactly.
    Wide,
}

fn num(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        return Num::Int(i);
    }
    let text = n.to_string();
    if !text.contains(['.', 'e', 'E']) {
        return Num::Wide;
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() && same_decimal(&text, &format!("{f:e}")) => {
            let f32_ok = text
                .parse::<f32>()
                .is_ok_and(|g| g.is_finite() && same_decimal(&text, &format!("{g:e}")));
            Num::Float { f32_ok }
        }
        _ => Num::Wide,
    }
}

/// True when two JSON number texts have the same decimal value (`1.10` and `1.1e0`).
pub fn same_decimal(a: &str, b: &str) -> bool {
    decimal(a) == decimal(b)
}

/// A number text as (negative, significant digits, exponent of the last digit).
fn decimal(s: &str) -> (bool, String, i64) {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (mant, exp) = match s.find(['e', 'E']) {
        Some(k) => (&s[..k], s[k + 1..].parse::<i64>().unwrap_or(0)),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let mut digits: String = format!("{int}{frac}");
    let mut exp = exp - frac.len() as i64;
    let lead = digits.len() - digits.trim_start_matches('0').len();
    digits.drain(..lead);
    while digits.ends_with('0') {
        digits.pop();
        exp += 1;
    }
    if digits.is_empty() {
        exp = 0;
    }
    (neg, digits, exp)
}

impl Node {
    fn int(&mut self, i: i64) {
        match &mut self.kind {
            Kind::Null => self.kind = Kind::Int { min: i, max: i },
            Kind::Int { min, max } => {
                *min = (*min).min(i);
                *max = (*max).max(i);
            }
            Kind::Float { f32_ok } => {
                if i.unsigned_abs() > F64_INT as u64 {
                    self.kind = Kind::Json;
                } else {
                    *f32_ok &= i.unsigned_abs() <= F32_INT as u64;
                }
            }
            Kind::Json => {}
            _ => self.kind = Kind::Json,
        }
    }

    fn float(&mut self, ok: bool) {
        match &mut self.kind {
            Kind::Null => self.kind = Kind::Float { f32_ok: ok },
            Kind::Float { f32_ok } => *f32_ok &= ok,
            Kind::Int { min, max } => {
                let wide = min.unsigned_abs().max(max.unsigned_abs());
                self.kind = if wide > F64_INT as u64 {
                    Kind::Json
                } else {
                    Kind::Float {
                        f32_ok: ok && wide <= F32_INT as u64,
                    }
                };
            }
            Kind::Json => {}
            _ => self.kind = Kind::Json,
        }
    }

    fn scalar(&mut self, k: Kind) {
        match (&self.kind, &k) {
            (Kind::Null, _) => self.kind = k,
            (Kind::Bool, Kind::Bool) | (Kind::Str, Kind::Str) | (Kind::Json, _) => {}
            _ => self.kind = Kind::Json,
        }
    }

    /// Take in one value at this path.
    pub fn see(&mut self, v: &Value) {
        match v {
            Value::Null => self.null = true,
            Value::Bool(_) => self.scalar(Kind::Bool),
            Value::String(_) => self.scalar(Kind::Str),
            Value::Number(n) => match num(n) {
                Num::Int(i) => self.int(i),
                Num::Float { f32_ok } => self.float(f32_ok),
                Num::Wide => self.kind = Kind::Json,
            },
            Value::Array(items) => {
                if let Kind::Null = self.kind {
                    self.kind = Kind::List(Box::default());
                }
                match &mut self.kind {
                    Kind::List(item) => items.iter().for_each(|x| item.see(x)),
                    Kind::Json => {}
                    _ => self.kind = Kind::Json,
                }
            }
            Value::Object(o) => {
                if let Kind::Null = self.kind {
                    self.kind = Kind::Struct {
                        fields: IndexMap::new(),
                        objects: 0,
                        keys_vary: false,
                    };
                }
                match &mut self.kind {
                    Kind::Struct {
                        fields,
                        objects,
                        keys_vary,
                    } => {
                        let before = fields.len();
                        for (k, x) in o {
                            fields
                                .entry(k.clone())
                                .or_insert_with(|| Node {
                                    absent: *objects > 0,
                                    ..Node::default()
                                })
                                .see(x);
                        }
                        let all_had = fields.len() == before;
                        if fields.len() != o.len() || o.is_empty() || (*objects > 0 && !all_had) {
                            *keys_vary = true;
                            for (k, f) in fields.iter_mut() {
                                if !o.contains_key(k) {
                                    f.absent = true;
                                }
                            }
                        }
                        *objects += 1;
                    }
                    Kind::Json => {}
                    _ => self.kind = Kind::Json,
                }
            }
        }
    }

    /// The members of a row (the top level), as columns: `hint` the columns of the
    /// Parquet inputs, by name.
    pub fn columns(&self, hint: &HashMap<String, Field>) -> Fields {
        match &self.kind {
            Kind::Struct { fields, .. } => fields
                .iter()
                .map(|(k, n)| n.field(k, hint.get(k)))
                .collect(),
            _ => Fields::empty(),
        }
    }

    /// This path's field, named `name`; `hint` the input's field here.
    fn field(&self, name: &str, hint: Option<&Field>) -> Field {
        let json_type = hint.and_then(json_storage);
        // A member written as `null` in some rows and left out of others: JSON text,
        // where a written null is the text `null` and a missing member a null, so that
        // both read back as they were.
        let (dt, json) = if let Some(dt) = &json_type {
            (dt.clone(), true)
        } else if self.null && self.absent {
            (DataType::Utf8, true)
        } else {
            self.data_type(hint.map(Field::data_type))
        };
        let mut meta = HashMap::new();
        if json {
            meta.insert(JSON_KEY.to_string(), "1".to_string());
        }
        if self.null && !self.absent {
            meta.insert(NULL_KEY.to_string(), "1".to_string());
        }
        let f = Field::new(name, dt, true).with_metadata(meta);
        match json_type {
            // Sets the extension's name and its (empty) metadata: without the latter
            // the Parquet writer does not take the field for a JSON one.
            Some(_) => f.with_extension_type(Json::default()),
            None => f,
        }
    }

    /// The type of this path and whether it is JSON text.
    fn data_type(&self, hint: Option<&DataType>) -> (DataType, bool) {
        use DataType as D;
        let dt = match (&self.kind, hint) {
            (Kind::Null, Some(h)) if supported(h) => h.clone(),
            (Kind::Null, _) => D::Null,
            (Kind::Bool, _) => D::Boolean,
            (Kind::Int { min, max }, h) => match h.filter(|h| int_fits(h, *min, *max)) {
                Some(h) => h.clone(),
                None => D::Int64,
            },
            (Kind::Float { f32_ok: true }, Some(D::Float32)) => D::Float32,
            (Kind::Float { .. }, _) => D::Float64,
            (Kind::Str, Some(D::LargeUtf8)) => D::LargeUtf8,
            (Kind::Str, _) => D::Utf8,
            (Kind::List(item), Some(D::LargeList(h))) => {
                D::LargeList(Arc::new(item.field(h.name(), Some(h))))
            }
            (Kind::List(item), h) => {
                let h = match h {
                    Some(D::List(f)) => Some(f),
                    _ => None,
                };
                let name = h.map_or("item", |f| f.name().as_str());
                D::List(Arc::new(item.field(name, h.map(|f| f.as_ref()))))
            }
            (Kind::Struct { fields, .. }, _) if fields.is_empty() => return (D::Utf8, true),
            (Kind::Struct { fields, .. }, Some(D::Struct(h))) => D::Struct(
                fields
                    .iter()
                    .map(|(k, n)| n.field(k, h.find(k).map(|(_, f)| f.as_ref())))
                    .collect(),
            ),
            (
                Kind::Struct {
                    keys_vary: true, ..
                },
                _,
            ) => return (D::Utf8, true),
            (Kind::Struct { fields, .. }, _) => D::Struct(
                fields
                    .iter()
                    .map(|(k, n)| n.field(k, None))
                    .collect::<Fields>(),
            ),
            (Kind::Json, _) => return (D::Utf8, true),
        };
        (dt, false)
    }
}

/// The string type a JSON column of the input's field `f` (of the `arrow.json`
/// extension) is written with: its own, or `Utf8` for a view (which traj does not write).
fn json_storage(f: &Field) -> Option<DataType> {
    if f.extension_type_name() != Some(Json::NAME) {
        return None;
    }
    match f.data_type() {
        DataType::LargeUtf8 => Some(DataType::LargeUtf8),
        DataType::Utf8 | DataType::Utf8View => Some(DataType::Utf8),
        _ => None,
    }
}

/// The types traj writes and reads back (any input type of these may be kept).
pub fn supported(dt: &DataType) -> bool {
    use DataType as D;
    match dt {
        D::Null | D::Boolean | D::Float32 | D::Float64 | D::Utf8 | D::LargeUtf8 => true,
        D::Int8 | D::Int16 | D::Int32 | D::Int64 => true,
        D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => true,
        D::List(f) | D::LargeList(f) => supported(f.data_type()),
        D::Struct(fs) => !fs.is_empty() && fs.iter().all(|f| supported(f.data_type())),
        _ => false,
    }
}

/// The paths below `f` (itself at `path`) that hold JSON text: `a`, `a[]`, `a.b`.
pub fn json_paths(f: &Field, path: &str, out: &mut Vec<String>) {
    if f.metadata().contains_key(JSON_KEY) {
        out.push(path.to_string());
        return;
    }
    match f.data_type() {
        DataType::List(item) | DataType::LargeList(item) => {
            json_paths(item, &format!("{path}[]"), out)
        }
        DataType::Struct(fs) => {
            for c in fs {
                json_paths(c, &format!("{path}.{}", c.name()), out);
            }
        }
        _ => {}
    }
}

fn int_fits(dt: &DataType, min: i64, max: i64) -> bool {
    use DataType as D;
    let (lo, hi): (i64, i64) = match dt {
        D::Int8 => (i8::MIN.into(), i8::MAX.into()),
        D::Int16 => (i16::MIN.into(), i16::MAX.into()),
        D::Int32 => (i32::MIN.into(), i32::MAX.into()),
        D::Int64 => (i64::MIN, i64::MAX),
        D::UInt8 => (0, u8::MAX.into()),
        D::UInt16 => (0, u16::MAX.into()),
        D::UInt32 => (0, u32::MAX.into()),
        D::UInt64 => (0, i64::MAX),
        _ => return false,
    };
    lo <= min && max <= hi
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rows: &str) -> Fields {
        let mut root = Node::default();
        for l in rows.lines() {
            root.see(&serde_json::from_str(l).unwrap());
        }
        root.columns(&HashMap::new())
    }

    #[test]
    fn decimals_compare_by_value() {
        assert!(same_decimal("1.10", "1.1e0"));
        assert!(same_decimal("100", "1e2"));
        assert!(same_decimal("0.000", "0e0"));
        assert!(!same_decimal("0.1000000000000000000001", "1e-1"));
        assert!(!same_decimal("-1", "1"));
    }

    #[test]
    fn types_by_the_values() {
        let f = shape(concat!(
            "{\"i\":1,\"f\":1.5,\"m\":2,\"b\":true,\"s\":\"x\",\"n\":null,\"l\":[],\"o\":{\"a\":1}}\n",
            "{\"i\":-7,\"f\":2,\"m\":2.25,\"b\":false,\"s\":\"y\",\"n\":null,\"l\":[],\"o\":{\"a\":null}}\n",
        ));
        let t: Vec<String> = f.iter().map(|f| f.data_type().to_string()).collect();
        assert_eq!(
            t,
            [
                "Int64",
                "Float64",
                "Float64",
                "Boolean",
                "Utf8",
                "Null",
                "List(Null)",
                "Struct(\"a\": Int64, metadata: {\"traj.null\": \"1\"})"
            ]
        );
        assert!(f[0].metadata().is_empty());
        assert_eq!(f[5].metadata().get(NULL_KEY).map(String::as_str), Some("1"));
    }

    #[test]
    fn what_varies_is_json() {
        let f = shape(concat!(
            "{\"a\":1,\"big\":123456789012345678901234567890,\"o\":{\"x\":1},\"e\":{},\"p\":0.1000000000000000000001}\n",
            "{\"a\":\"1\",\"big\":1,\"o\":{\"y\":1},\"e\":{},\"p\":1.5}\n",
        ));
        for x in f.iter() {
            assert_eq!(x.data_type(), &DataType::Utf8, "{x:?}");
            assert_eq!(x.metadata().get(JSON_KEY).map(String::as_str), Some("1"));
        }
    }

    #[test]
    fn a_member_null_in_some_rows_and_missing_in_others_is_json() {
        let f = shape("{\"a\":null,\"b\":1,\"c\":2}\n{\"b\":null}\n{\"b\":3,\"c\":null}\n");
        let json: Vec<bool> = f
            .iter()
            .map(|x| x.metadata().contains_key(JSON_KEY))
            .collect();
        // a: null or missing; b: null or a number, never missing; c: all three.
        assert_eq!(json, [true, false, true]);
        assert_eq!(f[1].data_type(), &DataType::Int64);
    }

    #[test]
    fn an_input_type_is_kept_where_the_values_fit() {
        let mut root = Node::default();
        root.see(&serde_json::json!({"a": 5, "b": 70000, "o": {"x": 1}}));
        root.see(&serde_json::json!({"a": 6, "o": {}}));
        let s32 = DataType::Struct(vec![Field::new("x", DataType::Int32, true)].into());
        let hint: HashMap<String, Field> = [
            Field::new("a", DataType::Int8, true),
            Field::new("b", DataType::Int16, true),
            Field::new("o", s32.clone(), true),
        ]
        .into_iter()
        .map(|f| (f.name().clone(), f))
        .collect();
        let f = root.columns(&hint);
        assert_eq!(f[0].data_type(), &DataType::Int8);
        assert_eq!(f[1].data_type(), &DataType::Int64, "70000 is no int16");
        assert_eq!(f[2].data_type(), &s32);
    }

    #[test]
    fn a_json_column_of_the_input_stays_one_whatever_its_values() {
        let mut root = Node::default();
        root.see(&serde_json::json!({"j": {"a": 1}, "l": [{"a": 1}], "s": "x"}));
        let json = |name: &str, dt: DataType| {
            Field::new(name, dt, true).with_extension_type(Json::default())
        };
        let hint: HashMap<String, Field> = [
            json("j", DataType::LargeUtf8),
            Field::new(
                "l",
                DataType::List(Arc::new(json("element", DataType::Utf8))),
                true,
            ),
            Field::new("s", DataType::Utf8, true),
        ]
        .into_iter()
        .map(|f| (f.name().clone(), f))
        .collect();
        let f = root.columns(&hint);
        let is_json = |f: &Field| {
            f.metadata().contains_key(JSON_KEY) && f.extension_type_name() == Some(Json::NAME)
        };
        // Values that agree on a struct: still JSON text, of the input's string type.
        assert!(is_json(&f[0]), "{:?}", f[0]);
        assert_eq!(f[0].data_type(), &DataType::LargeUtf8);
        match f[1].data_type() {
            DataType::List(item) => {
                assert!(is_json(item), "{item:?}");
                assert_eq!(item.name(), "element");
            }
            t => panic!("{t}"),
        }
        // A plain string column is no JSON column.
        assert!(f[2].metadata().is_empty(), "{:?}", f[2]);
    }
}
