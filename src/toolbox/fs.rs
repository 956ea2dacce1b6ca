//! The file tools (`read_file`, `write_file`, `patch`, `search_files`), confined to a
//! task's workspace.
//!
//! A path is first read as words, never looked up: relative paths start at the
//! task's working directory; an absolute path is accepted only when it names a place
//! inside the workspace (as the host or the sandbox sees it); `..` may not climb out.
//! What is left, plain components under the workspace root, is then opened by the
//! kernel from a descriptor of the root without following any symbolic link
//! ([`super::beneath`]), so a link, or a path swapped between two directories while
//! the tool runs, can never lead outside. A regular file with more than one hard link
//! is refused (the other link may be outside). Anything else is refused with an
//! error the model can act on.

use crate::toolbox::ToolError;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use serde_json::{Value, json};

use super::beneath::{self, Beneath, Resolver};

/// Largest file `read_file`, `patch` and content search will load.
const MAX_FILE_BYTES: u64 = 10 << 20;
/// Most characters `read_file` returns in one call.
const MAX_READ_CHARS: usize = 100_000;

/// A workspace and how paths in it are written.
#[derive(Debug, Clone)]
pub struct Confined {
    /// Canonical host path of the workspace.
    pub root: PathBuf,
    /// Host directory relative paths start from (inside `root`).
    pub base: PathBuf,
    /// The workspace root as commands see it (`/workspace` in bwrap and docker).
    pub view_root: String,
    /// How paths are opened beneath the root.
    pub resolver: Resolver,
}

type ToolOutcome = Result<Value, ToolError>;

fn str_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ToolError::from(format!(
            "argument {name:?} must be a string, not {}",
            crate::io::json_kind(other)
        ))),
        None => Err(ToolError::from(format!(
            "missing required argument {name:?} (a string)"
        ))),
    }
}

fn opt_u64(args: &Value, name: &str) -> Result<Option<u64>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(Some)
            .ok_or_else(|| ToolError(format!("argument {name:?} must be a non-negative integer"))),
    }
}

/// The message for a failed open or create of `path`.
fn open_error(path: &str, e: std::io::Error) -> ToolError {
    ToolError(match Errno::from_io_error(&e) {
        Some(Errno::LOOP | Errno::XDEV) => format!(
            "{path}: goes through a symbolic link; refused (file tools do not follow symbolic links)"
        ),
        Some(Errno::NOENT) => format!("{path}: no such file"),
        Some(Errno::NOTDIR) => format!("{path}: a part of the path is not a directory"),
        Some(Errno::ISDIR) => format!("{path}: is a directory"),
        _ => format!("{path}: {e}"),
    })
}

/// Open `name` in `dir` for writing, made when missing (`flags` added), never through a
/// link; errors name `path`.
fn create_at(path: &str, dir: &OwnedFd, name: &OsStr, flags: OFlags) -> Result<OwnedFd, ToolError> {
    let base = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, base | flags, Mode::from_raw_mode(0o666))
        .map_err(|e| open_error(path, e.into()))
}

/// Refuse `fd` when it is a regular file with more than one hard link.
fn single_link(path: &str, fd: &OwnedFd) -> Result<(), ToolError> {
    match beneath::hard_links(fd) {
        Ok(None) => Ok(()),
        Ok(Some(n)) => Err(ToolError::from(format!(
            "{path}: has {n} hard links; refused (another link may lead outside the workspace)"
        ))),
        Err(e) => Err(ToolError::from(format!("{path}: {e}"))),
    }
}

impl Confined {
    /// The path, relative to the workspace root, that `path` names (`""` = the
    /// root), or why it is refused. Only the words are read: nothing is looked up.
    pub fn relative(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.is_empty() {
            return Err(ToolError::from("empty path".to_string()));
        }
        let p = Path::new(path);
        let start: PathBuf = if p.is_absolute() {
            if let Ok(rel) = p.strip_prefix(&self.view_root) {
                rel.to_path_buf()
            } else if let Ok(rel) = p.strip_prefix(&self.root) {
                rel.to_path_buf()
            } else {
                return Err(ToolError::from(format!(
                    "{path}: absolute paths outside the workspace are refused; use a path relative to the workspace ({})",
                    self.view_root
                )));
            }
        } else {
            self.base
                .strip_prefix(&self.root)
                .unwrap_or(Path::new(""))
                .join(p)
        };
        let mut parts: Vec<&OsStr> = Vec::new();
        for c in start.components() {
            match c {
                Component::Normal(s) => parts.push(s),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(ToolError::from(format!(
                            "{path}: `..` leads outside the workspace; refused"
                        )));
                    }
                }
            }
        }
        Ok(parts.iter().collect())
    }

    fn beneath(&self) -> Result<Beneath, ToolError> {
        Beneath::new(&self.root, self.resolver)
            .map_err(|e| ToolError::from(format!("the workspace: {e}")))
    }

    /// Open `rel` beneath the root with `flags` (never following a link).
    fn open(&self, path: &str, rel: &Path, flags: OFlags) -> Result<OwnedFd, ToolError> {
        let parts: Vec<&OsStr> = rel.iter().collect();
        self.beneath()?
            .open(&parts, flags, Mode::empty())
            .map_err(|e| open_error(path, e))
    }

    /// `rel` as the model should see it: relative to the workspace root.
    fn show(&self, rel: &Path) -> String {
        if rel.as_os_str().is_empty() {
            ".".to_string()
        } else {
            rel.display().to_string()
        }
    }

    /// Open an existing regular file of at most `max` bytes for reading (`write`:
    /// for reading and writing), refusing directories, other special files and files
    /// with several hard links. Also gives the file's size.
    pub fn open_file(
        &self,
        path: &str,
        max: u64,
        write: bool,
    ) -> Result<(File, u64, PathBuf), ToolError> {
        let rel = self.relative(path)?;
        self.open_rel(path, rel, max, write)
    }

    /// [`Confined::open_file`] of a path already relative to the root.
    fn open_rel(
        &self,
        path: &str,
        rel: PathBuf,
        max: u64,
        write: bool,
    ) -> Result<(File, u64, PathBuf), ToolError> {
        let mode = if write { OFlags::RDWR } else { OFlags::RDONLY };
        let fd = match self.open(path, &rel, mode | OFlags::NONBLOCK) {
            Err(e) if write && e.0.ends_with(": is a directory") => {
                return Err(ToolError::from(format!(
                    "{e} (use search_files to list it)"
                )));
            }
            other => other?,
        };
        let (ft, _) = beneath::stat(&fd).map_err(|e| ToolError::from(format!("{path}: {e}")))?;
        match ft {
            FileType::RegularFile => {}
            FileType::Directory => {
                return Err(ToolError::from(format!(
                    "{path}: is a directory (use search_files to list it)"
                )));
            }
            _ => {
                return Err(ToolError::from(format!(
                    "{path}: not a regular file; refused"
                )));
            }
        }
        single_link(path, &fd)?;
        let file = File::from(fd);
        let len = file
            .metadata()
            .map_err(|e| ToolError::from(format!("{path}: {e}")))?
            .len();
        if len > max {
            return Err(ToolError::from(format!(
                "{path}: file is too large ({len} bytes, limit {max}); use the terminal (head, tail, grep) instead"
            )));
        }
        Ok((file, len, rel))
    }

    fn text_of(file: &mut File, path: &str) -> Result<String, ToolError> {
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::from(format!("{path}: {e}")))?;
        if bytes[..bytes.len().min(8192)].contains(&0) {
            return Err(ToolError::from(format!("{path}: binary file; not shown")));
        }
        String::from_utf8(bytes)
            .map_err(|_| ToolError::from(format!("{path}: not UTF-8 text; not shown")))
    }

    /// `read_file`: numbered lines `N|text`, paged by offset and limit.
    pub fn read_file(&self, args: &Value) -> ToolOutcome {
        let path = str_arg(args, "path")?;
        let offset = opt_u64(args, "offset")?.unwrap_or(1).max(1) as usize;
        let limit = opt_u64(args, "limit")?.unwrap_or(500).clamp(1, 2000) as usize;
        let (mut file, _, full) = self.open_file(path, MAX_FILE_BYTES, false)?;
        let text = Self::text_of(&mut file, path)?;
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        if offset > total.max(1) {
            return Err(ToolError::from(format!(
                "{path}: offset {offset} is past the end of the file ({total} lines)"
            )));
        }
        let mut content = String::new();
        let mut next = None;
        for (i, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
            let numbered = format!("{}|{line}\n", i + 1);
            if content.len() + numbered.len() > MAX_READ_CHARS && !content.is_empty() {
                next = Some(i + 1);
                break;
            }
            content.push_str(&numbered);
        }
        if next.is_none() && offset - 1 + limit < total {
            next = Some(offset + limit);
        }
        Ok(json!({
            "path": self.show(&full),
            "content": content,
            "total_lines": total,
            "next_offset": next,
        }))
    }

    /// `write_file`: create or replace a file (parents created).
    pub fn write_file(&self, args: &Value) -> ToolOutcome {
        let path = str_arg(args, "path")?;
        let content = str_arg(args, "content")?;
        self.write_bytes(path, content.as_bytes())
    }

    /// Create or replace the file `path` (relative to the workspace, parents created)
    /// with `content`, by the rules of `write_file`.
    pub fn write_bytes(&self, path: &str, content: &[u8]) -> ToolOutcome {
        let (full, dir, name) = self.parent_of(path)?;
        // No O_TRUNC: a file with another hard link must be refused before it changes.
        let fd = create_at(path, &dir, &name, OFlags::NONBLOCK)?;
        if beneath::stat(&fd)
            .map_err(|e| ToolError::from(format!("{path}: {e}")))?
            .0
            != FileType::RegularFile
        {
            return Err(ToolError::from(format!(
                "{path}: not a regular file; refused"
            )));
        }
        single_link(path, &fd)?;
        let mut file = File::from(fd);
        file.set_len(0)
            .and_then(|()| file.write_all(content))
            .map_err(|e| ToolError::from(format!("{path}: {e}")))?;
        Ok(json!({"path": self.show(&full), "bytes_written": content.len()}))
    }

    /// Write `content` to a file that this call makes: whatever stood at `path` (a file
    /// left read-only, a FIFO, a link) is unlinked first and the file is created
    /// exclusively, so what is read there later was written since (the verifier's
    /// files, which a model must not be able to plant).
    pub fn write_new(&self, path: &str, content: &[u8]) -> ToolOutcome {
        let (full, dir, name) = self.parent_of(path)?;
        match rustix::fs::unlinkat(&dir, &name, rustix::fs::AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(open_error(path, e.into())),
        }
        let fd = create_at(path, &dir, &name, OFlags::EXCL)?;
        File::from(fd)
            .write_all(content)
            .map_err(|e| ToolError::from(format!("{path}: {e}")))?;
        Ok(json!({"path": self.show(&full), "bytes_written": content.len()}))
    }

    /// The workspace path of `path`, its folder (made when missing, never through a
    /// link) and its name.
    fn parent_of(&self, path: &str) -> Result<(PathBuf, OwnedFd, std::ffi::OsString), ToolError> {
        let full = self.relative(path)?;
        let parts: Vec<&OsStr> = full.iter().collect();
        let Some((name, dirs)) = parts.split_last() else {
            return Err(ToolError::from(format!("{path}: is a directory")));
        };
        let dir = self
            .beneath()?
            .create_dirs(dirs)
            .map_err(|e| open_error(path, e))?;
        let name = name.to_os_string();
        Ok((full, dir, name))
    }

    /// `patch`: replace an exact, unique piece of text (or all with `replace_all`).
    pub fn patch(&self, args: &Value) -> ToolOutcome {
        let path = str_arg(args, "path")?;
        let old = str_arg(args, "old_string")?;
        let new = str_arg(args, "new_string")?;
        let all = args
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if old.is_empty() {
            return Err(ToolError::from(
                "old_string is empty; to create a file use write_file".to_string(),
            ));
        }
        let (mut file, _, full) = self.open_file(path, MAX_FILE_BYTES, true)?;
        let text = Self::text_of(&mut file, path)?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(ToolError::from(format!(
                "{path}: old_string was not found (it must match exactly, white space included)"
            )));
        }
        if count > 1 && !all {
            return Err(ToolError::from(format!(
                "{path}: old_string occurs {count} times; include more surrounding text to make it unique, or set replace_all"
            )));
        }
        let first_line = text[..text.find(old).unwrap_or(0)].matches('\n').count() + 1;
        let updated = if all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        {
            use std::os::unix::fs::FileExt;
            file.set_len(0)
                .and_then(|()| file.write_all_at(updated.as_bytes(), 0))
                .map_err(|e| ToolError::from(format!("{path}: {e}")))?;
        }
        Ok(json!({
            "path": self.show(&full),
            "replacements": if all { count } else { 1 },
            "first_line": first_line,
        }))
    }

    /// `search_files`: regex over lines of text files, or a glob over file names.
    pub fn search_files(&self, args: &Value) -> ToolOutcome {
        let pattern = str_arg(args, "pattern")?;
        let target = match args.get("target") {
            None | Some(Value::Null) => "content",
            Some(Value::String(s)) if s == "content" || s == "files" => s.as_str(),
            Some(other) => {
                return Err(ToolError::from(format!(
                    "argument \"target\" must be \"content\" or \"files\", not {other}"
                )));
            }
        };
        let dir_arg = match args.get("path") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            _ => ".",
        };
        let limit = opt_u64(args, "limit")?.unwrap_or(50).clamp(1, 1000) as usize;
        let dir = self.relative(dir_arg)?;
        // Without O_DIRECTORY, so that a final symbolic link is ELOOP (refused), not
        // ENOTDIR.
        let fd = self.open(dir_arg, &dir, OFlags::RDONLY | OFlags::NONBLOCK)?;
        if beneath::stat(&fd)
            .map_err(|e| ToolError::from(format!("{dir_arg}: {e}")))?
            .0
            != FileType::Directory
        {
            return Err(ToolError::from(format!("{dir_arg}: not a directory")));
        }
        let mut files = Vec::new();
        walk(&fd, &dir, &mut files);
        if target == "files" {
            let re = glob_regex(pattern)?;
            let mut found = Vec::new();
            let mut more = false;
            for f in &files {
                let rel = self.show(f);
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let subject = if pattern.contains('/') {
                    rel.as_str()
                } else {
                    name
                };
                if re.is_match(subject) {
                    if found.len() == limit {
                        more = true;
                        break;
                    }
                    found.push(rel);
                }
            }
            return Ok(json!({"files": found, "count": found.len(), "truncated": more}));
        }
        let re = regex::Regex::new(pattern)
            .map_err(|e| ToolError::from(format!("invalid regular expression: {e}")))?;
        let name_filter = match args.get("file_glob") {
            Some(Value::String(g)) if !g.is_empty() => Some(glob_regex(g)?),
            _ => None,
        };
        let mut matches = Vec::new();
        let mut more = false;
        'files: for f in &files {
            if let Some(nf) = &name_filter {
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if !nf.is_match(name) {
                    continue;
                }
            }
            let Ok((mut file, _, _)) =
                self.open_rel(&self.show(f), f.clone(), MAX_FILE_BYTES, false)
            else {
                continue;
            };
            let mut bytes = Vec::new();
            if file.read_to_end(&mut bytes).is_err() {
                continue;
            }
            if bytes[..bytes.len().min(8192)].contains(&0) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    if matches.len() == limit {
                        more = true;
                        break 'files;
                    }
                    let shown: String = line.chars().take(300).collect();
                    matches.push(format!("{}:{}:{shown}", self.show(f), i + 1));
                }
            }
        }
        Ok(json!({"matches": matches, "count": matches.len(), "truncated": more}))
    }
}

/// Regular files under the open directory `dir` (at `rel` from the root), sorted,
/// never following a link, skipping `.git`.
fn walk(dir: &OwnedFd, rel: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = beneath::entries(dir) else {
        return;
    };
    for (name, ft) in entries {
        if ft == FileType::Directory {
            if name != ".git"
                && let Ok(sub) = rustix::fs::openat(
                    dir,
                    name.as_os_str(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            {
                walk(&sub, &rel.join(&name), out);
            }
        } else if ft == FileType::RegularFile {
            out.push(rel.join(&name));
        }
    }
}

/// A shell glob (`*`, `**`, `?`, `[...]`) as an anchored regex.
fn glob_regex(glob: &str) -> Result<regex::Regex, ToolError> {
    let mut re = String::from("^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                re.push_str(".*");
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '[' => {
                re.push('[');
                if chars.peek() == Some(&'!') {
                    chars.next();
                    re.push('^');
                }
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    if c == '\\' || c == '[' {
                        re.push('\\');
                    }
                    re.push(c);
                }
                re.push(']');
            }
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    regex::Regex::new(&re).map_err(|e| ToolError::from(format!("invalid glob {glob:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Confined) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src/sub")).unwrap();
        std::fs::write(
            root.join("src/main.py"),
            "import os\nprint('hello')\n# TODO: more\n",
        )
        .unwrap();
        std::fs::write(
            root.join("src/sub/util.py"),
            "def f():\n    return 1  # TODO\n",
        )
        .unwrap();
        std::fs::write(root.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
        std::fs::write(root.join("blob.bin"), b"ab\0cd").unwrap();
        let c = Confined {
            root: root.clone(),
            base: root,
            view_root: "/workspace".into(),
            resolver: Resolver::Auto,
        };
        (d, c)
    }

    #[test]
    fn escapes_are_refused() {
        let (d, c) = setup();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(outside.path(), c.root.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), c.root.join("s")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", c.root.join("dangling")).unwrap();
        for bad in [
            "../x",
            "src/../../x",
            "/etc/passwd",
            "link/secret",
            "s",
            "dangling",
            "link/new.txt",
        ] {
            let e = c.read_file(&json!({"path": bad})).unwrap_err();
            assert!(e.contains("refused"), "{bad}: {e}");
            let e = c
                .write_file(&json!({"path": bad, "content": "x"}))
                .unwrap_err();
            assert!(e.contains("refused"), "{bad}: {e}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).unwrap(),
            "s3cret"
        );
        assert!(!outside.path().join("new.txt").exists());
        // Inside paths, in every spelling, are fine.
        for good in ["notes.txt", "./src/../notes.txt", "/workspace/notes.txt"] {
            assert!(c.read_file(&json!({"path": good})).is_ok(), "{good}");
        }
        let host = format!("{}/notes.txt", c.root.display());
        assert!(c.read_file(&json!({"path": host})).is_ok());
        let e = c
            .search_files(&json!({"pattern": "x", "path": "link"}))
            .unwrap_err();
        assert!(e.contains("refused"), "{e}");
        drop(d);
    }

    #[test]
    fn read_pages_and_rejects_binary() {
        let (_d, c) = setup();
        let r = c
            .read_file(&json!({"path": "notes.txt", "offset": 2, "limit": 1}))
            .unwrap();
        assert_eq!(r["content"], "2|beta\n");
        assert_eq!(r["total_lines"], 3);
        assert_eq!(r["next_offset"], 3);
        let r = c.read_file(&json!({"path": "notes.txt"})).unwrap();
        assert_eq!(r["content"], "1|alpha\n2|beta\n3|gamma\n");
        assert!(r["next_offset"].is_null());
        assert!(
            c.read_file(&json!({"path": "blob.bin"}))
                .unwrap_err()
                .contains("binary")
        );
        assert!(
            c.read_file(&json!({"path": "nope"}))
                .unwrap_err()
                .contains("no such file")
        );
        assert!(
            c.read_file(&json!({"path": "src"}))
                .unwrap_err()
                .contains("directory")
        );
        assert!(
            c.read_file(&json!({"path": "notes.txt", "offset": 9}))
                .unwrap_err()
                .contains("past the end")
        );
        assert!(
            c.read_file(&json!({}))
                .unwrap_err()
                .contains("missing required argument")
        );
    }

    #[test]
    fn write_and_patch() {
        let (_d, c) = setup();
        let r = c
            .write_file(&json!({"path": "new/dir/a.txt", "content": "x = 1\nx = 1\n"}))
            .unwrap();
        assert_eq!(r["path"], "new/dir/a.txt");
        assert_eq!(r["bytes_written"], 12);
        let e = c
            .patch(&json!({"path": "new/dir/a.txt", "old_string": "x = 1", "new_string": "y"}))
            .unwrap_err();
        assert!(e.contains("occurs 2 times"), "{e}");
        let e = c
            .patch(&json!({"path": "new/dir/a.txt", "old_string": "zzz", "new_string": "y"}))
            .unwrap_err();
        assert!(e.contains("not found"), "{e}");
        let r = c
            .patch(&json!({"path": "new/dir/a.txt", "old_string": "x = 1", "new_string": "y = 2", "replace_all": true}))
            .unwrap();
        assert_eq!(r["replacements"], 2);
        assert_eq!(
            std::fs::read_to_string(c.root.join("new/dir/a.txt")).unwrap(),
            "y = 2\ny = 2\n"
        );
        let r = c
            .patch(&json!({"path": "notes.txt", "old_string": "beta\n", "new_string": ""}))
            .unwrap();
        assert_eq!(r["first_line"], 2);
        assert_eq!(
            std::fs::read_to_string(c.root.join("notes.txt")).unwrap(),
            "alpha\ngamma\n"
        );
    }

    #[test]
    fn search_content_and_names() {
        let (_d, c) = setup();
        let r = c.search_files(&json!({"pattern": "TODO"})).unwrap();
        assert_eq!(
            r["matches"],
            json!([
                "src/main.py:3:# TODO: more",
                "src/sub/util.py:2:    return 1  # TODO"
            ])
        );
        let r = c
            .search_files(&json!({"pattern": "TODO", "limit": 1}))
            .unwrap();
        assert_eq!(r["truncated"], true);
        let r = c
            .search_files(&json!({"pattern": "^def ", "path": "src/sub", "file_glob": "*.py"}))
            .unwrap();
        assert_eq!(r["matches"], json!(["src/sub/util.py:1:def f():"]));
        let r = c
            .search_files(&json!({"pattern": "*.py", "target": "files"}))
            .unwrap();
        assert_eq!(r["files"], json!(["src/main.py", "src/sub/util.py"]));
        let r = c
            .search_files(&json!({"pattern": "src/*.py", "target": "files"}))
            .unwrap();
        assert_eq!(r["files"], json!(["src/main.py"]));
        let e = c.search_files(&json!({"pattern": "("})).unwrap_err();
        assert!(e.contains("invalid regular expression"), "{e}");
        let e = c
            .search_files(&json!({"pattern": "x", "target": "web"}))
            .unwrap_err();
        assert!(e.contains("target"), "{e}");
    }

    fn with_resolver(c: &Confined, resolver: Resolver) -> Confined {
        Confined {
            resolver,
            ..c.clone()
        }
    }

    /// A hard link made to a file outside (as `ln` in the terminal can) is neither
    /// read nor changed, by either resolver.
    #[test]
    fn hard_links_are_refused() {
        let (_d, c) = setup();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "s3cret\n").unwrap();
        std::fs::hard_link(&secret, c.root.join("hardl")).unwrap();
        for resolver in [Resolver::Auto, Resolver::Walk] {
            let c = with_resolver(&c, resolver);
            let e = c.read_file(&json!({"path": "hardl"})).unwrap_err();
            assert!(e.contains("hard links; refused"), "{e}");
            let e = c
                .write_file(&json!({"path": "hardl", "content": "pwned"}))
                .unwrap_err();
            assert!(e.contains("hard links; refused"), "{e}");
            let e = c
                .patch(&json!({"path": "hardl", "old_string": "s3cret", "new_string": "x"}))
                .unwrap_err();
            assert!(e.contains("hard links; refused"), "{e}");
            let r = c.search_files(&json!({"pattern": "s3cret"})).unwrap();
            assert_eq!(r["count"], 0, "{r}");
            // Files of one link are fine.
            assert!(c.read_file(&json!({"path": "notes.txt"})).is_ok());
        }
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret\n");
    }

    /// Special files are refused rather than read (a FIFO would block the tool).
    #[test]
    fn fifos_are_refused_not_waited_on() {
        let (_d, c) = setup();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            c.root.join("fifo"),
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let e = c.read_file(&json!({"path": "fifo"})).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    /// A thread swaps `d` between a directory of the workspace and a symbolic link to
    /// an outside one (atomically, `renameat2(RENAME_EXCHANGE)`) while write_file and
    /// read_file run through `d`: nothing is ever written or read outside.
    #[test]
    fn symlink_swap_race_never_escapes() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        for resolver in [Resolver::Auto, Resolver::Walk] {
            let (_d, c) = setup();
            let c = with_resolver(&c, resolver);
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("x"), "outside secret").unwrap();
            std::fs::create_dir(c.root.join("d")).unwrap();
            std::fs::write(c.root.join("d/x"), "inside").unwrap();
            std::os::unix::fs::symlink(outside.path(), c.root.join("l")).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let swapper = {
                let (stop, root, count) = (stop.clone(), c.root.clone(), count.clone());
                std::thread::spawn(move || {
                    let mut swaps = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        rustix::fs::renameat_with(
                            rustix::fs::CWD,
                            root.join("d"),
                            rustix::fs::CWD,
                            root.join("l"),
                            rustix::fs::RenameFlags::EXCHANGE,
                        )
                        .unwrap();
                        swaps += 1;
                        count.store(swaps, Ordering::Relaxed);
                        std::thread::yield_now();
                    }
                    swaps
                })
            };
            let (mut written, mut read) = (0, 0);
            // At least 300 calls and 600 ms, and on a loaded machine until the swapper has
            // swapped 200 times (at most 20 s).
            let start = std::time::Instant::now();
            let mut i = 0;
            while i < 300
                || start.elapsed() < std::time::Duration::from_millis(600)
                || (count.load(Ordering::Relaxed) < 200
                    && start.elapsed() < std::time::Duration::from_secs(20))
            {
                i += 1;
                let path = format!("d/f{i}.txt");
                if c.write_file(&json!({"path": path, "content": "x"})).is_ok() {
                    written += 1;
                }
                if let Ok(r) = c.read_file(&json!({"path": "d/x"})) {
                    assert_eq!(r["content"], "1|inside\n", "{resolver:?}: read outside");
                    read += 1;
                }
            }
            stop.store(true, Ordering::Relaxed);
            let swaps = swapper.join().unwrap();
            let leaked: Vec<_> = std::fs::read_dir(outside.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(leaked, ["x"], "{resolver:?}: written outside");
            assert!(swaps > 100, "{swaps} swaps: the race did not run");
            // Some calls landed while `d` was the directory (others were refused).
            assert!(written + read > 0, "{resolver:?}: nothing got through");
        }
    }
}
