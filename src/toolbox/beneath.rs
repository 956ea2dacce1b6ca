//! Opening files beneath a directory so that no path, whatever the tools' own
//! commands do to the tree meanwhile, can lead out of it.
//!
//! Every open starts from a file descriptor of the workspace root and never follows
//! a symbolic link: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel
//! has it (Linux 5.6+), else a walk from the root descriptor, one component at a time,
//! each opened with `O_NOFOLLOW` relative to the previous one. Paths arrive already
//! split into plain components (no `..`, no `.`, no root), so nothing is checked on a
//! path string and then used: the kernel resolves each step against a descriptor that
//! is already inside. Regular files with more than one hard link are refused by the
//! callers ([`hard_links`]), since a link may name a file outside the workspace.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// 0: not probed yet; 1: openat2 works; 2: it does not (the walk is used).
static OPENAT2: AtomicU8 = AtomicU8::new(0);

/// How components are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` when the kernel has it,
    /// else [`Resolver::Walk`].
    Auto,
    /// One `openat(O_NOFOLLOW)` per component.
    Walk,
}

/// A directory that opens are confined to.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
    resolver: Resolver,
}

/// The file type and link count of an open file.
pub fn stat(fd: impl AsFd) -> io::Result<(FileType, u64)> {
    let st = rustix::fs::fstat(fd)?;
    Ok((FileType::from_raw_mode(st.st_mode), st.st_nlink as u64))
}

/// The link count of an open regular file when it has more than one (`None`
/// otherwise): such a file is refused.
pub fn hard_links(fd: impl AsFd) -> io::Result<Option<u64>> {
    let (ft, links) = stat(fd)?;
    Ok((ft == FileType::RegularFile && links > 1).then_some(links))
}

fn join(parts: &[&OsStr]) -> PathBuf {
    if parts.is_empty() {
        PathBuf::from(".")
    } else {
        parts.iter().collect()
    }
}

impl Beneath {
    /// Confine opens to the directory `root` (itself opened as given).
    pub fn new(root: &Path, resolver: Resolver) -> io::Result<Beneath> {
        let root = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Beneath { root, resolver })
    }

    fn use_openat2(&self) -> bool {
        if self.resolver == Resolver::Walk {
            return false;
        }
        match OPENAT2.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let ok = !matches!(
                    rustix::fs::openat2(
                        &self.root,
                        ".",
                        OFlags::PATH | OFlags::CLOEXEC,
                        Mode::empty(),
                        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
                    ),
                    Err(Errno::NOSYS | Errno::PERM | Errno::INVAL)
                );
                OPENAT2.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
                ok
            }
        }
    }

    /// Open `parts` (plain components; none = the root itself) with `flags`
    /// (`O_NOFOLLOW` and `O_CLOEXEC` are always added). A symbolic link anywhere on
    /// the way is `ELOOP` (or `ENOTDIR` from the walk).
    pub fn open(&self, parts: &[&OsStr], flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if self.use_openat2() {
            return Ok(rustix::fs::openat2(
                &self.root,
                join(parts),
                flags,
                mode,
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
            )?);
        }
        let Some((last, dirs)) = parts.split_last() else {
            return Ok(rustix::fs::openat(&self.root, ".", flags, mode)?);
        };
        let dir = self.walk_dirs(dirs, false)?;
        Ok(rustix::fs::openat(&dir, *last, flags, mode)?)
    }

    /// The directory `parts`, each missing component created (mode 0755), opened
    /// without following links; for creating a file in it.
    pub fn create_dirs(&self, parts: &[&OsStr]) -> io::Result<OwnedFd> {
        self.walk_dirs(parts, true)
    }

    fn walk_dirs(&self, parts: &[&OsStr], create: bool) -> io::Result<OwnedFd> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = rustix::fs::openat(&self.root, ".", flags, Mode::empty())?;
        for part in parts {
            if create {
                match rustix::fs::mkdirat(&dir, *part, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            dir = match rustix::fs::openat(&dir, *part, flags, Mode::empty()) {
                Ok(d) => d,
                // O_PATH | O_NOFOLLOW | O_DIRECTORY on a symbolic link: ENOTDIR. Say
                // ELOOP when it is one, so callers give one answer for links.
                Err(Errno::NOTDIR) => {
                    let st = rustix::fs::statat(&dir, *part, AtFlags::SYMLINK_NOFOLLOW)?;
                    if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                        return Err(Errno::LOOP.into());
                    }
                    return Err(Errno::NOTDIR.into());
                }
                Err(e) => return Err(e.into()),
            };
        }
        Ok(dir)
    }
}

/// The entries of an open directory (read with `O_RDONLY | O_DIRECTORY`), sorted by
/// name, without `.` and `..`, each with its type as `lstat` gives it.
pub fn entries(dir: &OwnedFd) -> io::Result<Vec<(std::ffi::OsString, FileType)>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    let mut rd = rustix::fs::Dir::read_from(dir)?;
    while let Some(e) = rd.read() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_os_string();
        let ft = match e.file_type() {
            FileType::Unknown => {
                match rustix::fs::statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                }
            }
            ft => ft,
        };
        out.push((name, ft));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
