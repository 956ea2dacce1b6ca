//! What is asked of a summarizing model (reference §4.3) and what its reply becomes
//! (§4.4): the prompt around a rendered region, and the reply under [`super::PREFIX`].

use super::PREFIX;

/// The summarization prompt (our own wording of the reference's instructions).
pub fn prompt(content: &str, summary_target_tokens: usize) -> String {
    format!(
        "Summarize the agent conversation turns below. Your summary replaces these turns in \
the conversation history, so the agent must be able to continue its work from it.\n\n\
IMPORTANT: write the summary in the same language as the turns. If they mix languages, \
use the one most of the text is in. Do not translate anything.\n\n\
Write neutrally about what the assistant did and learned:\n\
1. the actions it took (tool calls, searches, file reads and edits, commands);\n\
2. the results that matter;\n\
3. what it decided or found out;\n\
4. concrete details it will need again: file names, paths, values, outputs.\n\n\
Be factual and dense; aim for about {summary_target_tokens} tokens.\n\n\
---\nTURNS TO SUMMARIZE:\n{content}\n---\n\n\
Reply with the summary only, starting with \"{PREFIX}\"."
    )
}

/// Post-process a reply (reference §4.4): `None` is empty; strip; keep an existing
/// prefix; an empty text becomes the bare prefix; otherwise prefix and one space.
pub fn finish_summary(content: Option<&str>) -> String {
    let text = content.unwrap_or("").trim();
    if text.starts_with(PREFIX) {
        text.to_string()
    } else if text.is_empty() {
        PREFIX.to_string()
    } else {
        format!("{PREFIX} {text}")
    }
}
