//! The file tools (`read_file`, `write_file`, `patch`, `search_files`), confined to a
//! task's workspace.
//!
//! Every path goes through [`Confined::resolve`]: relative paths start at the task's
//! working directory; an absolute path is accepted only when it names a place inside
//! the workspace (as the host or the sandbox sees it); `..` may not climb out; and the
//! deepest existing part of the path, symlinks followed, must still be inside the
//! workspace. Anything else is refused with an error the model can act on.
//!
//! Tool calls of one task run one at a time, so a symlink cannot be swapped in
//! between the check and the use by the task's own commands.

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

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
}

type ToolOutcome = Result<Value, String>;

fn str_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "argument {name:?} must be a string, not {}",
            crate::io::json_kind(other)
        )),
        None => Err(format!("missing required argument {name:?} (a string)")),
    }
}

fn opt_u64(args: &Value, name: &str) -> Result<Option<u64>, String> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(Some)
            .ok_or_else(|| format!("argument {name:?} must be a non-negative integer")),
    }
}

impl Confined {
    /// The host path for `path`, or why it is refused.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        if path.is_empty() {
            return Err("empty path".to_string());
        }
        let p = Path::new(path);
        let start: PathBuf = if p.is_absolute() {
            if let Ok(rel) = p.strip_prefix(&self.view_root) {
                rel.to_path_buf()
            } else if let Ok(rel) = p.strip_prefix(&self.root) {
                rel.to_path_buf()
            } else {
                return Err(format!(
                    "{path}: absolute paths outside the workspace are refused; use a path relative to the workspace ({})",
                    self.view_root
                ));
            }
        } else {
            self.base
                .strip_prefix(&self.root)
                .unwrap_or(Path::new(""))
                .join(p)
        };
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for c in start.components() {
            match c {
                Component::Normal(s) => parts.push(s),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(format!("{path}: `..` leads outside the workspace; refused"));
                    }
                }
            }
        }
        let full: PathBuf = parts.iter().fold(self.root.clone(), |acc, s| acc.join(s));
        let mut probe = full.clone();
        while probe.symlink_metadata().is_err() {
            if !probe.pop() {
                break;
            }
        }
        let canon = probe
            .canonicalize()
            .map_err(|_| format!("{path}: goes through a broken symbolic link; refused"))?;
        if !canon.starts_with(&self.root) {
            return Err(format!(
                "{path}: a symbolic link leads outside the workspace; refused"
            ));
        }
        Ok(full)
    }

    /// `full` as the model should see it: relative to the workspace root.
    fn show(&self, full: &Path) -> String {
        let rel = full.strip_prefix(&self.root).unwrap_or(full);
        if rel.as_os_str().is_empty() {
            ".".to_string()
        } else {
            rel.display().to_string()
        }
    }

    fn load_text(&self, full: &Path, path: &str) -> Result<String, String> {
        let meta = std::fs::metadata(full).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{path}: no such file"),
            _ => format!("{path}: {e}"),
        })?;
        if meta.is_dir() {
            return Err(format!(
                "{path}: is a directory (use search_files to list it)"
            ));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{path}: file is too large ({} bytes, limit {MAX_FILE_BYTES}); use the terminal (head, tail, grep) instead",
                meta.len()
            ));
        }
        let bytes = std::fs::read(full).map_err(|e| format!("{path}: {e}"))?;
        if bytes[..bytes.len().min(8192)].contains(&0) {
            return Err(format!("{path}: binary file; not shown"));
        }
        String::from_utf8(bytes).map_err(|_| format!("{path}: not UTF-8 text; not shown"))
    }

    /// `read_file`: numbered lines `N|text`, paged by offset and limit.
    pub fn read_file(&self, args: &Value) -> ToolOutcome {
        let path = str_arg(args, "path")?;
        let full = self.resolve(path)?;
        let offset = opt_u64(args, "offset")?.unwrap_or(1).max(1) as usize;
        let limit = opt_u64(args, "limit")?.unwrap_or(500).clamp(1, 2000) as usize;
        let text = self.load_text(&full, path)?;
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        if offset > total.max(1) {
            return Err(format!(
                "{path}: offset {offset} is past the end of the file ({total} lines)"
            ));
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
        let full = self.resolve(path)?;
        if full.is_dir() {
            return Err(format!("{path}: is a directory"));
        }
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{path}: {e}"))?;
        }
        std::fs::write(&full, content).map_err(|e| format!("{path}: {e}"))?;
        Ok(json!({"path": self.show(&full), "bytes_written": content.len()}))
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
            return Err("old_string is empty; to create a file use write_file".to_string());
        }
        let full = self.resolve(path)?;
        let text = self.load_text(&full, path)?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(format!(
                "{path}: old_string was not found (it must match exactly, white space included)"
            ));
        }
        if count > 1 && !all {
            return Err(format!(
                "{path}: old_string occurs {count} times; include more surrounding text to make it unique, or set replace_all"
            ));
        }
        let first_line = text[..text.find(old).unwrap_or(0)].matches('\n').count() + 1;
        let updated = if all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        std::fs::write(&full, &updated).map_err(|e| format!("{path}: {e}"))?;
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
                return Err(format!(
                    "argument \"target\" must be \"content\" or \"files\", not {other}"
                ));
            }
        };
        let dir_arg = match args.get("path") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            _ => ".",
        };
        let limit = opt_u64(args, "limit")?.unwrap_or(50).clamp(1, 1000) as usize;
        let dir = self.resolve(dir_arg)?;
        if !dir.is_dir() {
            return Err(format!("{dir_arg}: not a directory"));
        }
        let mut files = Vec::new();
        walk(&dir, &mut files);
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
        let re =
            regex::Regex::new(pattern).map_err(|e| format!("invalid regular expression: {e}"))?;
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
            let Ok(meta) = f.metadata() else { continue };
            if meta.len() > MAX_FILE_BYTES {
                continue;
            }
            let Ok(bytes) = std::fs::read(f) else {
                continue;
            };
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

/// Regular files under `dir`, sorted, not following symlinks, skipping `.git`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            if e.file_name() != ".git" {
                walk(&e.path(), out);
            }
        } else if ft.is_file() {
            out.push(e.path());
        }
    }
}

/// A shell glob (`*`, `**`, `?`, `[...]`) as an anchored regex.
fn glob_regex(glob: &str) -> Result<regex::Regex, String> {
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
    regex::Regex::new(&re).map_err(|e| format!("invalid glob {glob:?}: {e}"))
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
}
