//! Why a row cannot be normalised: the typed errors of traj-normalize's engine. The
//! `Display` text of a [`BadRow`] is the reason written to the rejects file.

use crate::format::hermes::{EnvelopeError, ParseError};
use crate::format::model::DeclError;
use crate::format::repair::Broken;

/// Why a line is not written: it is not a row by the rules every stage applies to a
/// line (the text is [`crate::io::parse_object`]'s), it stands for a prompt the run
/// dropped, or the row cannot be normalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadLine {
    #[error("{0}")]
    NotARow(String),
    /// A tombstone ([`crate::format::row::tombstone`]): no trajectory to convert, and
    /// no bad line either. The text is its reason.
    #[error("{0}")]
    Tombstone(String),
    #[error(transparent)]
    Row(#[from] BadRow),
}

/// Why a row cannot be normalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRow {
    /// The row's `bridge_calls` do not fit its calls.
    #[error(transparent)]
    Bridge(#[from] crate::format::bridge::RestoreError),
    /// The message list field holds something else.
    #[error("`{0}` must be a list of messages, found {1}")]
    NotAList(String, &'static str),
    /// `--messages-field F` and the row has no `F`.
    #[error("no `{0}` field")]
    NoField(String),
    /// No `conversations` or `messages`; a list under another usual name, if any.
    #[error(
        "no message list: expected a `conversations` or `messages` field{}",
        .0.map_or(String::new(), |h| format!(" (try --messages-field {h})"))
    )]
    NoMessageList(Option<&'static str>),
    #[error(transparent)]
    Tools(#[from] ToolsField),
    /// The row's `message_keys` field is not what traj-normalize writes there.
    #[error(transparent)]
    Kept(#[from] super::keep::BadKept),
    /// Message `n` (1-based) of the list.
    #[error("message {0}: {1}")]
    Message(usize, BadMessage),
    #[error("the conversation has no user, assistant or tool turns")]
    NoTurns,
    #[error("the row has both `{0}` (read) and `{1}` (would be overwritten)")]
    BothLists(String, &'static str),
    /// A group of rollouts (`--to groups` rows, Atropos dumps) that cannot be read.
    #[error("group of rollouts: {0}")]
    Group(String),
    /// Turn `n` (1-based, the system turn is 1) cannot be written as Hermes text.
    #[error("turn {0}: {1}")]
    Envelope(usize, EnvelopeError),
}

/// The row's own `tools` field is not a tool list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsField {
    #[error("`tools` is a string but not JSON: {0}")]
    StringNotJson(String),
    #[error("`tools` must hold a list of tool schemas, found {0}")]
    StringNotAList(&'static str),
    #[error("`tools` must be a list of tool schemas or a JSON string of one, found {0}")]
    NotAList(&'static str),
    /// Entry `i` (0-based, as `tools[i]`).
    #[error("tools[{0}]: {1}")]
    Entry(usize, DeclError),
}

/// Why one message of the list cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadMessage {
    #[error("expected an object, found {0}")]
    NotAnObject(&'static str),
    #[error("no `role` or `from` string")]
    NoRole,
    #[error("unknown role {0:?}")]
    UnknownRole(String),
    #[error(transparent)]
    Body(#[from] BadBody),
    /// Hermes text (`<tools>`, `<tool_call>`, `<tool_response>`) that does not parse.
    #[error(transparent)]
    Hermes(#[from] ParseError),
    /// A gpt turn's tags that are not repaired (see [`crate::format::repair`]).
    #[error(transparent)]
    Envelope(#[from] Broken),
    #[error("function_call is not JSON: {0}")]
    FunctionCallNotJson(String),
    #[error("function_call: {0}")]
    FunctionCall(DeclError),
    /// Entry `k` (0-based, as `tool_calls[k]`).
    #[error("tool_calls[{0}]: {1}")]
    ToolCall(usize, DeclError),
    #[error("tool_calls must be a list, found {0}")]
    ToolCallsNotAList(&'static str),
}

/// Why a message body (`content`/`value`) cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadBody {
    /// Part `k` (1-based) of this type outside an assistant message.
    #[error("content part {0} ({1}) is only allowed in assistant messages")]
    AssistantOnly(usize, String),
    #[error("content part {0} (tool_call) is not JSON: {1}")]
    CallPartNotJson(usize, String),
    #[error("content part {0}: {1}")]
    CallPart(usize, DeclError),
    #[error("content part {0}: {1}")]
    Part(usize, BadPart),
    #[error("content must be text or a list of parts, found {0}")]
    NotTextOrParts(&'static str),
}

/// A content part that is not understood (the message rule's, [`crate::format::message::part`]).
pub use crate::format::message::BadPart;
