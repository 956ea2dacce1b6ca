//! The agent's system prompt: traj's own default (identity, date, model, how to use the
//! tools), a text or file given with `--system-prompt`, or none; and how
//! `statistics.json` records which one a run used.

use std::path::PathBuf;

use super::config::ConfigError;
use super::record::SystemPromptUsed;

/// The default system prompt, before `{date}` and `{model}` are filled in. Written for
/// traj (not copied from any other agent).
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a capable assistant working as an agent. \
You are running as the model {model}; today's date is {date} (UTC).

When tools are offered, use them to act and to check facts instead of guessing: run \
commands, read and write files, search or fetch pages as the task needs. Call one tool at \
a time when a step depends on the previous result, and read each result before deciding \
the next step; a failed call returns an error you can learn from, so adjust and try again \
rather than repeating it. Work only inside the workspace you are given. When the task is \
done, or when you cannot make progress, stop calling tools and give a clear, complete \
final answer that states what you did and what you found.";

/// Which system prompt a run sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemPrompt {
    /// [`DEFAULT_SYSTEM_PROMPT`].
    Default,
    /// `--system-prompt TEXT`.
    Text(String),
    /// `--system-prompt @FILE`.
    File(PathBuf),
    /// `--no-system-prompt`.
    None,
}

impl SystemPrompt {
    /// From `--system-prompt` (`@FILE` reads a file) and `--no-system-prompt`.
    pub fn from_flags(value: Option<&str>, none: bool) -> SystemPrompt {
        match value {
            _ if none => SystemPrompt::None,
            None => SystemPrompt::Default,
            Some(v) => match v.strip_prefix('@') {
                Some(path) => SystemPrompt::File(PathBuf::from(path)),
                None => SystemPrompt::Text(v.to_string()),
            },
        }
    }

    /// The text to send for `model` today (UTC).
    pub fn resolve_today(&self, model: &str) -> Result<SystemPromptUsed, ConfigError> {
        let now = crate::format::time::utc_now();
        self.resolve(model, now.get(..10).unwrap_or(&now))
    }

    /// The text to send for `model` on `date` (`YYYY-MM-DD`).
    pub fn resolve(&self, model: &str, date: &str) -> Result<SystemPromptUsed, ConfigError> {
        let (source, path, text) = match self {
            SystemPrompt::Default => (
                "default",
                None,
                Some(
                    DEFAULT_SYSTEM_PROMPT
                        .replace("{model}", model)
                        .replace("{date}", date),
                ),
            ),
            SystemPrompt::Text(t) => ("text", None, Some(t.clone())),
            SystemPrompt::File(p) => {
                let t =
                    std::fs::read_to_string(p).map_err(|source| ConfigError::SystemPromptRead {
                        path: p.clone(),
                        source,
                    })?;
                ("file", Some(p.display().to_string()), Some(t))
            }
            SystemPrompt::None => ("none", None, None),
        };
        Ok(SystemPromptUsed { source, path, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_texts() {
        let d = SystemPrompt::from_flags(None, false)
            .resolve("m1", "2026-01-02")
            .unwrap();
        assert_eq!(d.source, "default");
        let t = d.text.unwrap();
        assert!(
            t.contains("m1") && t.contains("2026-01-02") && !t.contains('{'),
            "{t}"
        );
        assert_eq!(
            SystemPrompt::from_flags(Some("x"), true),
            SystemPrompt::None
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.txt");
        std::fs::write(&p, "from a file").unwrap();
        let arg = format!("@{}", p.display());
        let f = SystemPrompt::from_flags(Some(&arg), false)
            .resolve("m", "d")
            .unwrap();
        assert_eq!((f.source, f.text.as_deref()), ("file", Some("from a file")));
        let e = SystemPrompt::from_flags(Some("@/no/such/file"), false).resolve("m", "d");
        assert!(matches!(e, Err(ConfigError::SystemPromptRead { .. })));
        let n = SystemPrompt::None.resolve("m", "d").unwrap();
        assert_eq!(
            serde_json::to_string(&n).unwrap(),
            r#"{"source":"none","text":null}"#
        );
    }
}
