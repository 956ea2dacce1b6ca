//! traj-normalize's one hook for hermes-agent's bridge tools
//! ([`crate::format::bridge`]): a row's `bridge_calls` (the originals of a row resolved
//! before) are put back into its calls, then, for Hermes text under `--bridge resolve`
//! (the default), every `tool_call` that names one real tool is written as that tool's
//! call, its result named after it, and the originals are kept in `bridge_calls`
//! (written right after the message list). Every other target writes the calls as the
//! model made them and no `bridge_calls`.

use serde_json::{Map, Value};

use super::{BadRow, Bridge, Options, Target};
use crate::format::bridge::{self, FIELD};
use crate::format::model::{Trajectory, Turn};
use crate::format::pyjson::{self, Style};

/// Restore, then resolve (see the module docs); the new `bridge_calls`, if any.
pub(super) fn apply(
    row: &Map<String, Value>,
    traj: &mut Trajectory,
    opts: &Options,
) -> Result<Option<Value>, BadRow> {
    // A core row keeps its fields in `metadata` (a JSON object in a string).
    let in_meta = match row.get("metadata") {
        Some(Value::String(s)) if s.contains(FIELD) => {
            crate::format::row::core_metadata(row).and_then(|mut m| m.shift_remove(FIELD))
        }
        _ => None,
    };
    // `null` is no field: what `datasets` writes for a row without one beside rows with it.
    if let Some(v) = row.get(FIELD).filter(|v| !v.is_null()).or(in_meta.as_ref()) {
        bridge::restore_turns(traj, v)?;
    }
    if opts.target == Target::Hermes && opts.bridge == Bridge::Resolve {
        let originals = bridge::resolve_turns(traj);
        if !originals.is_empty() {
            return Ok(Some(bridge::originals_value(&originals)));
        }
    }
    Ok(None)
}

/// True when `traj` has a call that `--bridge resolve` rewrites.
pub(super) fn resolvable(traj: &Trajectory) -> bool {
    traj.turns.iter().any(|t| match t {
        Turn::Gpt(g) => g
            .tool_calls
            .iter()
            .any(|c| bridge::resolve(&c.name, &c.arguments).is_some()),
        _ => false,
    })
}

/// The row's `bridge_calls` set to `v` (removed when `None`), for `--columns core`.
pub(super) fn set_field(row: &mut Map<String, Value>, v: Option<Value>) {
    match v {
        Some(v) => {
            row.insert(FIELD.to_string(), v);
        }
        None => {
            row.shift_remove(FIELD);
        }
    }
}

/// `, "bridge_calls": V` when there is a `V`.
pub(super) fn write_field(out: &mut Vec<u8>, v: Option<Value>) {
    if let Some(v) = v {
        out.extend_from_slice(b", ");
        pyjson::write_str(out, FIELD, Style::Python);
        out.extend_from_slice(b": ");
        pyjson::write_value(out, &v, Style::Python);
    }
}
