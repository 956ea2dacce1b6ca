//! The files a run writes must not meet: two flags that name one file would leave only
//! the one committed last, and a rejects or stats file that is also an input would
//! replace the rows it was read from. `-o` alone may name an input (it is written to a
//! temp file and renamed only once the input has been read).
//!
//! Two names are one file when they are the same existing file (device and inode: links
//! and `./` spellings included) or, for a file not made yet, the same absolute path with
//! its folder resolved; `-` is stdout, which takes one stream of rows only, and so is any
//! name of the file stdout already is (`/dev/stdout`, `/proc/self/fd/1`, or `out.jsonl`
//! under `> out.jsonl`). Other special files (`/dev/null`, a FIFO) may be named twice.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::Source;

/// Two files of a run that are one file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    /// Two flags name one output file.
    #[error("{first} and {second} both name {name}: give each its own file")]
    Twice {
        first: &'static str,
        second: &'static str,
        /// The second's path as given, or `stdout`.
        name: String,
    },
    /// An output other than `-o` is one of the inputs.
    #[error("{flag} {} is an input of this run: writing it would replace the rows read from it", .path.display())]
    Input { flag: &'static str, path: PathBuf },
    /// Stdout, which takes an output, is one of the inputs (`f >> f`).
    #[error(
        "stdout is {name}, an input of this run: what is written would be read back as more input (as `cat f >> f`)"
    )]
    StdoutIsInput {
        /// The input as given, or `the file stdin reads`.
        name: String,
    },
}

impl crate::error::Classify for TargetError {
    /// Always the command line's fault (exit 2).
    fn is_usage(&self) -> bool {
        true
    }
}

/// What identifies a file: its device and inode when it exists, else its absolute path
/// with the folder resolved, or stdout (`-`). `None` for a special file, which may be
/// named twice.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Stdout,
    Inode(u64, u64),
    Path(PathBuf),
}

/// The device and inode of the file stdout writes, unless that is `/dev/null` (which
/// takes any number of streams).
fn stdout_file() -> Option<(u64, u64)> {
    let m = meta_of(std::io::stdout())?;
    let null = std::fs::metadata("/dev/null").ok();
    let is_null = null.is_some_and(|n| m.file_type().is_char_device() && m.rdev() == n.rdev());
    (!is_null).then(|| (m.dev(), m.ino()))
}

/// What stdin reads from.
fn stdin_meta() -> Option<std::fs::Metadata> {
    meta_of(std::io::stdin())
}

/// The metadata of the file behind `fd` (through a duplicate of it, closed after).
fn meta_of(fd: impl std::os::fd::AsFd) -> Option<std::fs::Metadata> {
    let owned = fd.as_fd().try_clone_to_owned().ok()?;
    std::fs::File::from(owned).metadata().ok()
}

/// What `p` names, given the file stdout writes (`stdout`, from [`stdout_file`]).
fn identity(p: &Path, stdout: Option<(u64, u64)>) -> Option<Identity> {
    if p == Path::new("-") {
        return Some(Identity::Stdout);
    }
    match std::fs::metadata(p) {
        Ok(m) if stdout == Some((m.dev(), m.ino())) => Some(Identity::Stdout),
        Ok(m) if m.is_file() => Some(Identity::Inode(m.dev(), m.ino())),
        Ok(_) => None,
        Err(_) => {
            let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            let resolved = match (abs.parent(), abs.file_name()) {
                (Some(dir), Some(name)) => std::fs::canonicalize(dir)
                    .map(|d| d.join(name))
                    .unwrap_or(abs),
                _ => abs,
            };
            Some(Identity::Path(resolved))
        }
    }
}

/// Check the files a run writes: `output` (`-o`, which may be an input; `-` for stdout)
/// and `others` (flag and path; `None` when not given), against each other and against
/// the input files of `sources`.
pub fn check_targets(
    output: Option<&Path>,
    others: &[(&'static str, Option<&Path>)],
    sources: &[Source],
) -> Result<(), TargetError> {
    let stdout = stdout_file();
    let named: Vec<(&'static str, &Path, Identity)> = std::iter::once(("-o", output))
        .chain(others.iter().copied())
        .filter_map(|(flag, p)| {
            let p = p?;
            Some((flag, p, identity(p, stdout)?))
        })
        .collect();
    for (i, (first, _, id)) in named.iter().enumerate() {
        if let Some((second, path, _)) = named[i + 1..].iter().find(|(_, _, o)| o == id) {
            let name = match id {
                Identity::Stdout => "stdout".to_string(),
                _ => path.display().to_string(),
            };
            return Err(TargetError::Twice {
                first,
                second,
                name,
            });
        }
    }
    // An output streamed to stdout while stdout is an input file (`f >> f`, or `< f >> f`)
    // would be read back as it is written, without end.
    if let Some(out) = stdout
        && named.iter().any(|(_, _, id)| *id == Identity::Stdout)
    {
        let is_stdout = |m: std::fs::Metadata| m.is_file() && (m.dev(), m.ino()) == out;
        for s in sources {
            let name = match s {
                Source::File(p) if std::fs::metadata(p).is_ok_and(is_stdout) => {
                    p.display().to_string()
                }
                Source::Stdin if stdin_meta().is_some_and(is_stdout) => {
                    "the file stdin reads".to_string()
                }
                _ => continue,
            };
            return Err(TargetError::StdoutIsInput { name });
        }
    }
    let inputs: Vec<Identity> = sources
        .iter()
        .filter_map(|s| match s {
            Source::File(p) => identity(p, None),
            Source::Stdin | Source::Spooled { .. } => None,
        })
        .collect();
    match named
        .iter()
        .skip(usize::from(output.is_some()))
        .find(|(_, _, id)| inputs.contains(id))
    {
        Some((flag, path, _)) => Err(TargetError::Input {
            flag,
            path: path.to_path_buf(),
        }),
        None => Ok(()),
    }
}

/// True when `path` is one of the input files of `sources`, stdin's file included (`-o`
/// onto its input).
pub fn is_input(path: &Path, sources: &[Source]) -> bool {
    let Some(id) = identity(path, None) else {
        return false;
    };
    sources.iter().any(|s| match s {
        Source::File(p) => identity(p, None).as_ref() == Some(&id),
        Source::Stdin => {
            stdin_meta().is_some_and(|m| m.is_file() && Identity::Inode(m.dev(), m.ino()) == id)
        }
        Source::Spooled { .. } => false,
    })
}

/// Why `-o` onto its own input is not written: `lost` lines would be in no file at all.
/// The input keeps its bytes.
pub fn onto_input_with_loss(path: &Path, lost: u64) -> anyhow::Error {
    anyhow::anyhow!(
        "-o {}: not written: it is an input of this run, and {lost} lines would be lost \
         with it (no --rejects file); the input is kept as it was",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_meet_neither_each_other_nor_an_input() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.jsonl");
        std::fs::write(&input, "{}\n").unwrap();
        let sources = [Source::File(input.clone()), Source::Stdin];
        let out = dir.path().join("out.jsonl");
        let rej = dir.path().join("rej.jsonl");
        assert_eq!(
            check_targets(Some(&out), &[("--rejects", Some(&rej))], &sources),
            Ok(())
        );
        // -o may be the input; --rejects may not.
        assert_eq!(
            check_targets(Some(&input), &[("--rejects", None)], &sources),
            Ok(())
        );
        let e = check_targets(Some(&out), &[("--rejects", Some(&input))], &sources);
        assert_eq!(
            e,
            Err(TargetError::Input {
                flag: "--rejects",
                path: input.clone()
            })
        );
        // The same file not yet made, spelled two ways.
        let spelled = dir.path().join(".").join("out.jsonl");
        let e = check_targets(Some(&out), &[("--rejects", Some(&spelled))], &sources);
        assert!(
            matches!(
                e,
                Err(TargetError::Twice {
                    first: "-o",
                    second: "--rejects",
                    ..
                })
            ),
            "{e:?}"
        );
        let e = check_targets(
            None,
            &[("--rejects", Some(&rej)), ("--stats", Some(&rej))],
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--rejects and --stats both name {}: give each its own file",
                rej.display()
            )
        );
        // A link to the input is the input.
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        assert!(check_targets(None, &[("--stats", Some(&link))], &sources).is_err());
        // stdout takes one stream.
        let e = check_targets(
            Some(Path::new("-")),
            &[("--stats", Some(Path::new("-")))],
            &[],
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "-o and --stats both name stdout: give each its own file"
        );
        // Special files may be named twice.
        let null = Path::new("/dev/null");
        assert_eq!(
            check_targets(Some(null), &[("--rejects", Some(null))], &[]),
            Ok(())
        );
    }

    #[test]
    fn a_name_of_the_file_stdout_writes_is_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.jsonl");
        std::fs::write(&out, "").unwrap();
        let m = std::fs::metadata(&out).unwrap();
        let stdout = Some((m.dev(), m.ino()));
        assert_eq!(identity(&out, stdout), Some(Identity::Stdout));
        let link = dir.path().join("fd1");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        assert_eq!(identity(&link, stdout), Some(Identity::Stdout));
        assert_eq!(
            identity(&out, None),
            Some(Identity::Inode(m.dev(), m.ino()))
        );
        assert_eq!(identity(Path::new("/dev/null"), None), None);
    }
}
