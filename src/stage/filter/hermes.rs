//! The predicates' reading of Hermes ShareGPT rows: tags through the one Hermes
//! scanner, offered tools from the system turn's `<tools>` block (else the row's
//! `tools` field or `--tools FILE`), and calls paired with their responses.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Facts, NoToolList, Offered, Predicates, set_once};
use crate::format::hermes::{response_bodies, scan_gpt};
use crate::format::jsonscan::{object_members, scan_value, skip_ws};
use crate::format::row::{BadRow, RowView, Turn, decode_str};
use crate::format::tokens::Tokenizer;

/// The JSON body of a Hermes `<tool_call>`.
#[derive(Debug, Deserialize)]
struct CallBody<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// Why a `<tool_response>` body is not JSON: serde_json's message.
#[derive(Debug)]
struct NotJson(String);

/// Validate a `<tool_response>` body as JSON and return its `name`, if it is an object
/// with a string `name` (the fast scanner; serde_json only for an error's message).
fn response_name(body: &str) -> Result<Option<Cow<'_, str>>, NotJson> {
    let b = body.as_bytes();
    let mut name = None;
    let end = if b.first() == Some(&b'{') {
        object_members(b, 0, |key, vs, ve| {
            if &*crate::format::jsonscan::key_text(key) == b"name" {
                name = decode_str(&body[vs..ve]);
            }
        })
    } else {
        scan_value(b, 0)
    };
    match end {
        Ok(e) if skip_ws(b, e) == b.len() => Ok(name),
        _ => Err(NotJson(
            match serde_json::from_str::<serde::de::IgnoredAny>(body) {
                Err(e) => e.to_string(),
                Ok(_) => "not valid JSON".into(),
            },
        )),
    }
}

/// The names in the `<tools>` block of a system turn: `None` when there is no block.
/// Read by traj-normalize's own reader ([`crate::format::hermes::parse_system`]: a JSON
/// list, or one JSON object a line as Qwen's and Hermes-2-Pro's templates write them;
/// the template's prose naming the tags is skipped).
fn system_tools(v: &str) -> Option<Result<Vec<String>, NoToolList>> {
    use crate::format::hermes::ParseError;
    Some(match crate::format::hermes::parse_system(v)? {
        Ok(specs) => Ok(specs.into_iter().map(|t| t.name).collect()),
        Err(ParseError::ToolsUnclosed) => Err(NoToolList::SystemUnclosed),
        Err(e) => Err(NoToolList::System(e)),
    })
}

/// The facts of a Hermes ShareGPT row.
pub(super) fn facts(
    turns: &[Turn<'_>],
    row: &RowView<'_>,
    p: &Predicates,
    tokenizer: Option<&dyn Tokenizer>,
) -> Result<Facts, BadRow> {
    let mut f = Facts::new(turns.len(), p, "no turns");
    let need_tools = p.valid_tools || p.well_formed;
    // Offered tools: --tools FILE, else the system turn's <tools>, else the row's `tools`.
    let mut offered = p.tools.as_ref().map(Offered::Global);
    let mut pending_calls: Vec<Option<String>> = Vec::new();
    let mut pending_turn = 0;
    for (i, turn) in turns.iter().enumerate() {
        let n = i + 1;
        let from: &str = &turn.from;
        let needs_value = from == "gpt"
            || from == "function_call"
            || (from == "system" && need_tools)
            || (from == "tool" && p.well_formed)
            || p.needs_tokens();
        let value = if needs_value {
            match decode_str(turn.value) {
                Some(v) => v,
                None => return Err(BadRow::ValueNotString(n)),
            }
        } else {
            Cow::Borrowed("")
        };
        if let Some(tk) = tokenizer {
            f.tokens += tk.count(&value);
        }
        let answers = from == "tool" || from == "observation";
        if p.well_formed && !answers && !pending_calls.is_empty() {
            set_once(&mut f.malformed, || {
                format!(
                    "turn {pending_turn}: {} tool call(s) without a tool turn after them",
                    pending_calls.len()
                )
            });
            pending_calls.clear();
        }
        match from {
            "system" => {
                if p.well_formed && i != 0 {
                    set_once(&mut f.malformed, || {
                        format!("turn {n}: system turn not first")
                    });
                }
                if need_tools && offered.is_none() {
                    match system_tools(&value) {
                        Some(Ok(names)) => offered = Some(Offered::Row(names)),
                        Some(Err(e)) => {
                            if p.well_formed {
                                set_once(&mut f.malformed, || format!("turn {n}: {e}"));
                            }
                            offered = Some(Offered::Unknown(e));
                        }
                        None => {}
                    }
                }
            }
            "human" => {}
            "gpt" => {
                let g = scan_gpt(&value);
                // A turn traj-normalize repairs has the reasoning of its repaired text.
                f.reasoning |= g.reasoning || (g.error.is_some() && repaired_reasoning(&value));
                f.calls += g.calls.len();
                if p.well_formed
                    && let Some(e) = &g.error
                {
                    set_once(&mut f.malformed, || format!("turn {n}: {e}"));
                }
                if need_tools && offered.is_none() && !g.calls.is_empty() {
                    offered = Some(Offered::of_row(row.tools, NoToolList::NoSystemTools));
                }
                for body in &g.calls {
                    let parsed = serde_json::from_str::<CallBody>(body);
                    match &parsed {
                        Ok(c) => {
                            if p.valid_tools {
                                let o = offered.as_ref().expect("set above");
                                if let Err(e) =
                                    o.check_call(&c.name, c.arguments, |a| a.get().starts_with('{'))
                                {
                                    set_once(&mut f.invalid_tool, || format!("turn {n}: {e}"));
                                }
                            }
                        }
                        Err(e) => {
                            let msg = || format!("turn {n}: <tool_call> body is not JSON: {e}");
                            if p.valid_tools {
                                set_once(&mut f.invalid_tool, msg);
                            }
                            if p.well_formed {
                                set_once(&mut f.malformed, msg);
                            }
                        }
                    }
                    if p.well_formed {
                        pending_calls.push(parsed.ok().map(|c| c.name.into_owned()));
                    }
                }
                pending_turn = n;
            }
            // LLaMA-Factory's ShareGPT turns (its glaive-style datasets): the calls of a
            // `function_call` turn, read as traj-normalize reads them.
            "function_call" => {
                let fc = crate::format::llamafactory::parse_function_call(&value);
                f.reasoning |= fc.reasoning.is_some_and(|r| !r.trim().is_empty())
                    || scan_gpt(fc.content).reasoning;
                let calls = super::json_calls(fc.calls);
                f.calls += calls.len();
                if p.well_formed {
                    // The next turn, an `observation`, answers them.
                    for c in &calls {
                        match c {
                            super::JsonCall::Named(name, _) => {
                                pending_calls.push(Some(name.clone()))
                            }
                            super::JsonCall::Bad(e) => {
                                set_once(&mut f.malformed, || format!("turn {n}: {e}"));
                                pending_calls.push(None);
                            }
                        }
                    }
                    pending_turn = n;
                }
                if p.valid_tools {
                    if offered.is_none() {
                        offered = Some(Offered::of_row(row.tools, NoToolList::NoSystemTools));
                    }
                    let o = offered.as_ref().expect("set above");
                    for c in &calls {
                        if let Err(e) = c.check(o) {
                            set_once(&mut f.invalid_tool, || format!("turn {n}: {e}"));
                        }
                    }
                }
            }
            "observation" if !p.well_formed => {}
            // A LLaMA-Factory observation: the results of the function_call before it,
            // as one text (it carries no names to pair).
            "observation" => {
                if pending_calls.is_empty() {
                    set_once(&mut f.malformed, || {
                        format!("turn {n}: observation turn does not follow a function_call turn")
                    });
                }
                pending_calls.clear();
            }
            "tool" if p.well_formed => {
                if pending_calls.is_empty() {
                    set_once(&mut f.malformed, || {
                        format!("turn {n}: tool turn does not follow a gpt turn with tool calls")
                    });
                } else {
                    check_responses(&value, &pending_calls, n, &mut f.malformed);
                }
                pending_calls.clear();
            }
            other if p.well_formed => set_once(&mut f.malformed, || {
                format!("turn {n}: unknown role {other:?}")
            }),
            _ => {}
        }
    }
    if p.well_formed && !pending_calls.is_empty() {
        set_once(&mut f.malformed, || {
            format!(
                "turn {pending_turn}: {} tool call(s) without a tool turn after them",
                pending_calls.len()
            )
        });
    }
    Ok(f)
}

/// The repaired text of a gpt turn with a tag error ([`crate::format::repair`], as
/// traj-normalize repairs it) holds reasoning.
fn repaired_reasoning(value: &str) -> bool {
    use crate::format::repair::{Mode, Repairs, repair_gpt};
    repair_gpt(value, false, Mode::Repair, &mut Repairs::default())
        .is_ok_and(|v| scan_gpt(&v).reasoning)
}

/// Pair the `<tool_response>` blocks of tool turn `n` with the pending calls' names.
fn check_responses(value: &str, calls: &[Option<String>], n: usize, slot: &mut Option<String>) {
    let bodies = match response_bodies(value) {
        Ok(b) => b,
        Err(e) => return set_once(slot, || format!("turn {n}: {e}")),
    };
    for (k, body) in bodies.iter().enumerate() {
        match response_name(body) {
            Ok(name) => {
                if let (Some(name), Some(Some(call))) = (&name, calls.get(k))
                    && name != call
                {
                    return set_once(slot, || {
                        format!(
                            "turn {n}: response {} is named {name:?} but call {} is {call:?}",
                            k + 1,
                            k + 1
                        )
                    });
                }
            }
            Err(NotJson(e)) => {
                return set_once(slot, || {
                    format!("turn {n}: <tool_response> {} body is not JSON: {e}", k + 1)
                });
            }
        }
    }
    if bodies.len() != calls.len() {
        set_once(slot, || {
            format!(
                "turn {n}: {} response(s) for {} call(s)",
                bodies.len(),
                calls.len()
            )
        });
    }
}
