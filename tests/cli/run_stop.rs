//! traj-run's ends and limits as seen from outside: a `kill -9` leaves no tool process
//! behind, `--prompt-timeout` bounds the tools too, and a signal ends a run that is
//! still waiting for its run directory's lock.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::standin::Standin;
use crate::util::*;

/// A stand-in whose every task runs `command` in the terminal once, then answers.
fn one_command(command: &str) -> Standin {
    Standin::json(json!({"record": false, "rules": [{"match": "", "turns": [
        {"tool_calls": [{"name": "terminal", "arguments": {"command": command}}]},
        {"content": "done"}]}]}))
}

fn traj_run(dir: &Path, s: &Standin) -> Command {
    let mut c = standin_run(dir, &s.url(), "data/r");
    c.args(["-q", "--toolsets", "terminal"]);
    c
}

/// Wait at most `secs` for `child` to end.
fn wait_at_most(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() > until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_kill_9_of_traj_run_leaves_no_tool_process_behind() {
    // A kept sandbox's supervisor read its stdin only between commands: killed in the
    // middle of one, traj-run left it running (re-parented to init) to the command's
    // end or the tool timeout.
    for (k, backend) in ["local", "bwrap"].iter().enumerate() {
        let d = tmpdir();
        let secs = format!("{}", 4317 + k);
        let s = one_command(&format!("sleep {secs}"));
        let input = write_prompts(d.path(), &["a"]);
        let mut c = traj_run(d.path(), &s);
        c.args([&input, "-j", "1", "--sandbox", backend])
            .args(["--tool-timeout", "600"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let argv = ["sleep", secs.as_str()];
        wait_for("the sleeping tool", 30, || {
            processes_running(&argv).len() == 1
        });
        child.kill().unwrap(); // SIGKILL: nothing of traj-run runs after it
        child.wait().unwrap();
        let t = Instant::now();
        while !processes_running(&argv).is_empty() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left = processes_running(&argv);
        for pid in &left {
            // This test's own leftover: not left to run for ten minutes.
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        assert!(
            left.is_empty(),
            "{backend}: the tool outlived traj-run's kill -9"
        );
    }
}

#[test]
fn prompt_timeout_bounds_a_tool_call() {
    // The command got the tool timeout (180 s), whatever the prompt had left: a 30 s
    // sleep ran to its end before the prompt failed.
    let d = tmpdir();
    let s = one_command("sleep 4330; echo x");
    let input = write_prompts(d.path(), &["a"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--prompt-timeout", "2"]);
    let t = Instant::now();
    let o = run(c);
    let took = t.elapsed();
    assert_code(&o, 1);
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let f = failures(&d.path().join("data/r"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["class"], "prompt_timeout", "{f:?}");
    assert!(processes_running(&["sleep", "4330"]).is_empty());
}

#[test]
fn a_signal_ends_a_run_waiting_for_the_run_directorys_lock() {
    // A blocking flock restarted after the signal handler ran: SIGTERM was ignored
    // until the holder ended.
    for sig in ["TERM", "INT"] {
        let d = tmpdir();
        let s = Standin::json(json!({"record": false}));
        let input = write_prompts(d.path(), &["a", "b"]);
        let run_dir = d.path().join("data/r");
        std::fs::create_dir_all(&run_dir).unwrap();
        // This test holds the lock, as another traj-run would.
        let held = std::fs::File::create(run_dir.join(".lock")).unwrap();
        rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
        let err = d.path().join("err.txt");
        let mut c = standin_run(d.path(), &s.url(), "data/r");
        c.args([&input, "--resume", "--wait", "--toolsets", "file"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap());
        let mut child = c.spawn().unwrap();
        wait_for("traj-run to wait for the lock", 20, || {
            std::fs::read_to_string(&err).is_ok_and(|t| t.contains("waiting for"))
        });
        let t = Instant::now();
        send_signal(sig, child.id());
        let status = wait_at_most(&mut child, 10);
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let status = status.unwrap_or_else(|| panic!("SIG{sig}: still waiting for the lock"));
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "SIG{sig}: {:?}",
            t.elapsed()
        );
        assert_eq!(status.code(), Some(1), "SIG{sig}");
        let text = std::fs::read_to_string(&err).unwrap();
        assert!(
            text.contains("interrupted while waiting"),
            "SIG{sig}: {text}"
        );
        assert_eq!(s.count(), 0, "SIG{sig}: nothing ran");
        drop(held);
    }
}
