//! The container image of a task, made sure of before its first model call: the row's
//! `image` (or, as the reference also reads, `docker_image`; `image` wins), checked
//! with `CLI image inspect` and fetched with `CLI pull` when missing, once per image
//! per run. A task whose image cannot be had is a `tool_host` failure (retried on
//! resume), never a record holding a `docker run failed` tool error.

use std::collections::HashMap;
use std::io::Read;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::toolbox::TaskSpec;

/// How long `image inspect` may take (as the reference).
pub const INSPECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `pull` may take (as the reference).
pub const PULL_TIMEOUT: Duration = Duration::from_secs(600);
/// Most bytes of the CLI's stderr kept in a failure message.
const STDERR_KEPT: usize = 500;

/// The image and working directory a task row names: `image`, else `docker_image`
/// (empty and non-string values ignored), and `cwd`.
pub fn spec_of(row: &Map<String, Value>) -> TaskSpec {
    let s = |k: &str| {
        row.get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    TaskSpec {
        image: s("image").or_else(|| s("docker_image")),
        cwd: s("cwd"),
    }
}

/// Why an image cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Docker image not available: {image}: {reason}")]
pub struct ImageError {
    pub image: String,
    pub reason: String,
}

/// The outcome of one image's check, filled by the first task that needs it.
type Slot = Arc<Mutex<Option<Result<(), ImageError>>>>;

/// The images of one run, each checked (and pulled) at most once: workers needing the
/// same image wait for the first one's check and share its outcome.
pub struct Images {
    cli: String,
    checked: Mutex<HashMap<String, Slot>>,
}

impl Images {
    /// Images checked through the docker-compatible CLI `cli` (name or path).
    pub fn new(cli: &str) -> Images {
        Images {
            cli: cli.to_string(),
            checked: Mutex::new(HashMap::new()),
        }
    }

    /// Make sure `image` is present: `image inspect`, then `pull` when it is not.
    pub fn ensure(&self, image: &str) -> Result<(), ImageError> {
        let slot = self
            .checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(image.to_string())
            .or_default()
            .clone();
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = &*slot {
            return r.clone();
        }
        let r = self.check(image);
        *slot = Some(r.clone());
        r
    }

    fn check(&self, image: &str) -> Result<(), ImageError> {
        let fail = |reason: String| ImageError {
            image: image.to_string(),
            reason,
        };
        let run = |args: &[&str], timeout| run(&self.cli, args, timeout).map_err(|e| fail(e.0));
        // `--`: the image is never an option (hosts refuse one starting with `-` first).
        if run(&["image", "inspect", "--", image], INSPECT_TIMEOUT)?.0 {
            return Ok(());
        }
        match run(&["pull", "--", image], PULL_TIMEOUT)? {
            (true, _) => Ok(()),
            (false, stderr) => Err(fail(format!("{} pull failed: {stderr}", self.cli))),
        }
    }
}

/// The container CLI could not be run, or did not finish in time.
struct CliFailed(String);

/// Run `cli args` with a minimal environment (what the CLI needs to find its engine),
/// killed after `timeout`: whether it succeeded, and the start of its stderr.
fn run(cli: &str, args: &[&str], timeout: Duration) -> Result<(bool, String), CliFailed> {
    let mut c = crate::toolbox::sandbox::docker_command(cli);
    c.args(args);
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CliFailed(format!("cannot run {cli}: {e}")))?;
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut s) = stderr {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let ok = wait(&mut child, timeout);
    let stderr = reader.join().unwrap_or_default();
    let mut text = String::from_utf8_lossy(&stderr).trim().to_string();
    if text.len() > STDERR_KEPT {
        let mut end = STDERR_KEPT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    match ok {
        Some(ok) => Ok((ok, text)),
        None => Err(CliFailed(format!(
            "{cli} {} timed out after {}s",
            args[0],
            timeout.as_secs()
        ))),
    }
}

/// Wait for `child` until `timeout`: `Some(success)`, or `None` after killing it.
fn wait(child: &mut Child, timeout: Duration) -> Option<bool> {
    let end = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status.success()),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    fn row(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn image_wins_over_docker_image_and_empty_values_are_ignored() {
        let s = spec_of(&row(
            json!({"prompt": "p", "docker_image": "a", "cwd": "/app"}),
        ));
        assert_eq!(s.image.as_deref(), Some("a"));
        assert_eq!(s.cwd.as_deref(), Some("/app"));
        let s = spec_of(&row(json!({"image": "b", "docker_image": "a"})));
        assert_eq!(s.image.as_deref(), Some("b"));
        let s = spec_of(&row(json!({"image": "", "docker_image": "a"})));
        assert_eq!(s.image.as_deref(), Some("a"));
        let s = spec_of(&row(json!({"image": 3, "cwd": ""})));
        assert_eq!((s.image, s.cwd), (None, None));
    }

    /// A fake CLI: `image inspect present` succeeds, `pull pullable` succeeds, anything
    /// else fails; every call is logged.
    fn fake_cli(dir: &std::path::Path) -> (String, std::path::PathBuf) {
        let log = dir.join("log");
        let cli = dir.join("docker");
        std::fs::write(
            &cli,
            format!(
                "#!/bin/sh\necho \"$*\" >> {log}\ncase \"$*\" in\n  'image inspect -- present') exit 0 ;;\n  'pull -- pullable') exit 0 ;;\n  pull*) echo \"manifest for $3 not found\" >&2; exit 1 ;;\n  *) exit 1 ;;\nesac\n",
                log = log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
        (cli.display().to_string(), log)
    }

    #[test]
    fn inspect_then_pull_once_per_image() {
        let dir = tempfile::tempdir().unwrap();
        let (cli, log) = fake_cli(dir.path());
        let images = Images::new(&cli);
        assert_eq!(images.ensure("present"), Ok(()));
        assert_eq!(images.ensure("pullable"), Ok(()));
        let e = images.ensure("missing").unwrap_err();
        assert_eq!(e.image, "missing");
        assert!(e.reason.contains("manifest for missing not found"), "{e}");
        assert!(
            e.to_string()
                .starts_with("Docker image not available: missing")
        );
        // Asked again: the outcome is remembered, the CLI not called.
        assert!(images.ensure("missing").is_err());
        assert_eq!(images.ensure("present"), Ok(()));
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            calls,
            "image inspect -- present\nimage inspect -- pullable\npull -- pullable\nimage inspect -- missing\npull -- missing\n"
        );
    }

    #[test]
    fn a_missing_cli_is_an_image_error() {
        let e = Images::new("/nonexistent/docker").ensure("x").unwrap_err();
        assert!(e.reason.contains("cannot run /nonexistent/docker"), "{e}");
    }
}
