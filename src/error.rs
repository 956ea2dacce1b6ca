//! The typed errors of the library and the exit code each one maps to.
//!
//! Library code returns `anyhow::Result` whose chain may hold one of the errors below;
//! [`Error::of`] finds the one that decides the exit code, and only `cli::finish` turns
//! it into a process exit status:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success; also when the reader of stdout went away (broken pipe) |
//! | 1 | bad data (a bad line under the strict default, lines lost) or a failed run |
//! | 2 | usage or configuration error, or an input that cannot be opened or read |

use std::sync::Arc;

/// Exit status: success.
pub const EXIT_OK: u8 = 0;
/// Exit status: bad data, lost lines or a failed run.
pub const EXIT_DATA: u8 = 1;
/// Exit status: usage or configuration error; a missing or unreadable input.
pub const EXIT_USAGE: u8 = 2;

/// A usage or configuration error (a flag, a config file, a value out of range).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// An input that cannot be opened or read (as jq and ripgrep do, exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {source}")]
pub struct InputError {
    /// `cannot open`, `cannot read`.
    pub what: &'static str,
    pub path: Arc<str>,
    #[source]
    pub source: std::io::Error,
}

/// The class of an error, as far as the exit code goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The reader of stdout went away: not a failure.
    BrokenPipe,
    /// [`UsageError`] or [`InputError`].
    Usage,
    /// Anything else: bad data, a failed run.
    Data,
}

impl Error {
    /// The class of `e`, from the first typed error in its chain.
    pub fn of(e: &anyhow::Error) -> Error {
        for c in e.chain() {
            if c.downcast_ref::<UsageError>().is_some() || c.downcast_ref::<InputError>().is_some()
            {
                return Error::Usage;
            }
            if c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return Error::BrokenPipe;
            }
        }
        Error::Data
    }

    /// The process exit status of this class.
    pub fn code(self) -> u8 {
        match self {
            Error::BrokenPipe => EXIT_OK,
            Error::Usage => EXIT_USAGE,
            Error::Data => EXIT_DATA,
        }
    }
}

/// Return early with a [`UsageError`].
#[macro_export]
macro_rules! usage_bail {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::error::UsageError(format!($($arg)*))))
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn classes_come_from_the_chain() {
        let usage = anyhow::Error::new(UsageError("bad flag".into())).context("outer");
        assert_eq!(Error::of(&usage).code(), EXIT_USAGE);
        let input = anyhow::Error::new(InputError {
            what: "cannot open",
            path: Arc::from("x.jsonl"),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!(Error::of(&input), Error::Usage);
        let pipe: anyhow::Result<()> =
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe)).context("writing");
        assert_eq!(Error::of(&pipe.unwrap_err()).code(), EXIT_OK);
        assert_eq!(
            Error::of(&anyhow::anyhow!("x.jsonl:3: invalid JSON")).code(),
            EXIT_DATA
        );
    }
}
