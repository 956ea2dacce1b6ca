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
//! | 2 | usage or configuration error; an input not read or an output not created |

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

/// Any error the user must fix (a flag, a spec, a config), marked so without changing
/// its text or cutting its chain: it displays as the error it holds and its `source()`
/// is that error's, so `cli::finish` prints the whole chain and exits 2.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Usage(pub Box<dyn std::error::Error + Send + Sync + 'static>);

/// An error type that knows whether it is the user's to fix; [`classify`] is the one
/// place that turns that answer into the exit code's class.
pub trait Classify: std::error::Error + Send + Sync + Sized + 'static {
    /// True for a command line or config the user must fix (exit 2).
    fn is_usage(&self) -> bool;
}

/// `e` marked as a usage error ([`Usage`]), its chain kept.
pub fn usage(e: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> anyhow::Error {
    anyhow::Error::new(Usage(e.into()))
}

/// `e` as a usage error when its type says it is one ([`Classify`]), else as it is.
pub fn classify<E: Classify>(e: E) -> anyhow::Error {
    if e.is_usage() { usage(e) } else { e.into() }
}

/// A file named on the command line that cannot be opened, read or created: an input
/// (as jq and ripgrep do) or an output (as sort does); exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}")] // the chain printer adds `: {source}`
pub struct FileError {
    /// `cannot open`, `cannot read`, `cannot create`.
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
    /// [`UsageError`] or [`FileError`].
    Usage,
    /// Anything else: bad data, a failed run.
    Data,
}

impl Error {
    /// The class of `e`, from the first typed error in its chain.
    pub fn of(e: &anyhow::Error) -> Error {
        for c in e.chain() {
            if c.downcast_ref::<UsageError>().is_some()
                || c.downcast_ref::<Usage>().is_some()
                || c.downcast_ref::<FileError>().is_some()
            {
                return Error::Usage;
            }
            // serde_json's error of a writer holds the io::Error but gives the io::Error's
            // own source as its source, so the io::Error itself is not in the chain.
            if c.downcast_ref::<std::io::Error>()
                .map(std::io::Error::kind)
                .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind())
                == Some(std::io::ErrorKind::BrokenPipe)
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

    struct BrokenPipeWriter;
    impl std::io::Write for BrokenPipeWriter {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn classes_come_from_the_chain() {
        let usage = anyhow::Error::new(UsageError("bad flag".into())).context("outer");
        assert_eq!(Error::of(&usage).code(), EXIT_USAGE);
        let input = anyhow::Error::new(FileError {
            what: "cannot open",
            path: Arc::from("x.jsonl"),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!(Error::of(&input), Error::Usage);
        let pipe: anyhow::Result<()> =
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe)).context("writing");
        assert_eq!(Error::of(&pipe.unwrap_err()).code(), EXIT_OK);
        // serde_json writing a row to a closed pipe (traj-report's page)
        let json = serde_json::to_writer(BrokenPipeWriter, &serde_json::json!({"rows": [1, 2, 3]}))
            .unwrap_err();
        assert_eq!(Error::of(&anyhow::Error::new(json)).code(), EXIT_OK);
        assert_eq!(
            Error::of(&anyhow::anyhow!("x.jsonl:3: invalid JSON")).code(),
            EXIT_DATA
        );
    }

    #[test]
    fn usage_keeps_the_text_and_the_chain() {
        let inner: anyhow::Result<()> =
            Err(std::io::Error::from(std::io::ErrorKind::NotFound)).context("cannot read t.json");
        let inner = inner.unwrap_err();
        let text = format!("{inner:#}");
        let e = usage(inner).context("--tools");
        assert_eq!(Error::of(&e), Error::Usage);
        assert_eq!(format!("{e:#}"), format!("--tools: {text}"));
        assert!(
            e.chain()
                .any(|c| c.downcast_ref::<std::io::Error>().is_some())
        );
    }
}
