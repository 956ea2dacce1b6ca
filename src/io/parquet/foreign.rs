//! The rows of a Parquet file traj did not write, as JSON lines (arrow-json's writer,
//! null members left out), where a JSON column gives back the JSON it holds: a field of
//! Arrow's canonical `arrow.json` extension type (Parquet's `JSON` logical type), which
//! HF `datasets` 5 writes for its `Json()` features (`Dataset.to_parquet` of a mixed-type
//! member, of `messages` whose tool calls differ), holds one value's JSON text per row,
//! and that row's member is that value, not a string of it.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_json::WriterBuilder;
use arrow_json::writer::LineDelimited;
use arrow_json::writer::{Encoder, EncoderFactory, EncoderOptions, NullableEncoder};
use arrow_schema::extension::EXTENSION_TYPE_NAME_KEY;
use arrow_schema::{ArrowError, DataType, Field, FieldRef};

/// The extension name of Arrow's canonical JSON type.
const JSON_EXTENSION: &str = "arrow.json";

/// Append the rows of `batch` to `out`, one line each.
pub fn rows(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), ArrowError> {
    let mut w = WriterBuilder::new()
        .with_encoder_factory(Arc::new(JsonText))
        .build::<_, LineDelimited>(&mut *out);
    w.write(batch)?;
    w.finish()
}

/// Encodes the values of a JSON column as the JSON they hold.
#[derive(Debug)]
struct JsonText;

/// The field that describes `array`: `field` itself, or for a list the item field (of
/// any depth) whose type is the array's (arrow-json passes a list's own field with its
/// items' array).
fn field_of<'a>(field: &'a Field, array: &dyn Array) -> Option<&'a Field> {
    let mut f = field;
    loop {
        if f.data_type() == array.data_type() {
            return Some(f);
        }
        f = match f.data_type() {
            DataType::List(item)
            | DataType::LargeList(item)
            | DataType::ListView(item)
            | DataType::LargeListView(item)
            | DataType::FixedSizeList(item, _) => item,
            _ => return None,
        };
    }
}

impl EncoderFactory for JsonText {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let Some(f) = field_of(field, array) else {
            return Ok(None);
        };
        if f.metadata()
            .get(EXTENSION_TYPE_NAME_KEY)
            .map(String::as_str)
            != Some(JSON_EXTENSION)
        {
            return Ok(None);
        }
        let texts: Box<dyn Fn(usize) -> &'a str + 'a> = match array.data_type() {
            DataType::Utf8 => {
                let a = array.as_string::<i32>();
                Box::new(move |i| a.value(i))
            }
            DataType::LargeUtf8 => {
                let a = array.as_string::<i64>();
                Box::new(move |i| a.value(i))
            }
            DataType::Utf8View => {
                let a = array.as_string_view();
                Box::new(move |i| a.value(i))
            }
            _ => return Ok(None),
        };
        // Checked here, where an error can be given: a value that is not JSON would
        // make a line that is not JSON.
        for i in 0..array.len() {
            if array.is_valid(i) {
                serde_json::from_str::<serde::de::IgnoredAny>(texts(i)).map_err(|e| {
                    ArrowError::JsonError(format!(
                        "column `{}` is of the JSON type but a value is not JSON: {e}",
                        f.name()
                    ))
                })?;
            }
        }
        let nulls = array.logical_nulls();
        Ok(Some(NullableEncoder::new(Box::new(Raw(texts)), nulls)))
    }
}

/// Writes each value's text as it is (checked to be JSON).
struct Raw<'a>(Box<dyn Fn(usize) -> &'a str + 'a>);

impl Encoder for Raw<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.extend_from_slice((self.0)(idx).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{ListBuilder, StringBuilder};
    use arrow_array::{ArrayRef, StringArray};
    use arrow_schema::Schema;
    use std::collections::HashMap;

    fn json_field(name: &str) -> Field {
        Field::new(name, DataType::Utf8, true).with_metadata(HashMap::from([(
            EXTENSION_TYPE_NAME_KEY.to_string(),
            JSON_EXTENSION.to_string(),
        )]))
    }

    fn lines(batch: &RecordBatch) -> Result<String, ArrowError> {
        let mut out = Vec::new();
        rows(batch, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn json_columns_give_their_values_and_strings_stay_strings() {
        // A list of JSON items, as `datasets` 5 writes `messages: List(Json())`.
        let mut items =
            ListBuilder::new(StringBuilder::new()).with_field(Arc::new(json_field("element")));
        items.append_value([Some("{\"role\":\"user\",\"content\":\"hi\"}"), Some("1")]);
        items.append_null();
        items.append_value([None::<&str>]);
        let items = items.finish();
        let schema = Schema::new(vec![
            json_field("j"),
            Field::new("s", DataType::Utf8, true),
            Field::new("l", items.data_type().clone(), true),
        ]);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("{}"), Some("\"1\""), None])),
            Arc::new(StringArray::from(vec![Some("{}"), Some("1"), Some("x")])),
            Arc::new(items),
        ];
        let batch = RecordBatch::try_new(Arc::new(schema), cols).unwrap();
        assert_eq!(
            lines(&batch).unwrap(),
            concat!(
                "{\"j\":{},\"s\":\"{}\",\"l\":[{\"role\":\"user\",\"content\":\"hi\"},1]}\n",
                "{\"j\":\"1\",\"s\":\"1\"}\n",
                "{\"s\":\"x\",\"l\":[null]}\n",
            )
        );
    }

    #[test]
    fn a_json_column_that_holds_no_json_is_an_error() {
        let schema = Schema::new(vec![json_field("j")]);
        let col: ArrayRef = Arc::new(StringArray::from(vec!["{\"a\":"]));
        let batch = RecordBatch::try_new(Arc::new(schema), vec![col]).unwrap();
        let e = lines(&batch).unwrap_err().to_string();
        assert!(e.contains("column `j` is of the JSON type"), "{e}");
    }
}
