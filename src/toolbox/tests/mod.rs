//! Tests of the sandboxed runtime and every tool, through [`Task`] (the [`ToolHost`]
//! traj-run uses): success and failure paths, timeouts (the process group is gone
//! afterwards), leftovers, output caps, environment scrubbing, the bwrap backend, the
//! docker command line, and the web and model tools against servers on 127.0.0.1.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::exec::group_members;
use super::registry::{LlmToolsConfig, SearchConfig, SearchProvider};
use super::sandbox::Sandbox;
use super::testserver::{Reply, Request, serve};
use super::*;
use crate::llm::ClientConfig;

fn sets(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn task_with(
    cfg: &ToolConfig,
    sandbox: &SandboxConfig,
    toolsets: &[&str],
    spec: &TaskSpec,
) -> Task {
    Registry::builtin(cfg)
        .task(&sets(toolsets), sandbox, spec)
        .expect("task")
}

fn local_task(toolsets: &[&str]) -> Task {
    task_with(
        &ToolConfig::default(),
        &SandboxConfig::default(),
        toolsets,
        &TaskSpec::default(),
    )
}

fn bwrap_config() -> SandboxConfig {
    if let Err(e) = Sandbox::probe_bwrap() {
        panic!(
            "the bwrap backend cannot be tested on this machine: {e:#}. Install bubblewrap \
             (scripts/setup.sh does) and allow unprivileged user namespaces."
        );
    }
    SandboxConfig {
        backend: Backend::Bwrap,
        ..SandboxConfig::default()
    }
}

/// Parse a tool result's JSON content.
fn content(r: &ToolResult) -> Value {
    serde_json::from_str(&r.content).unwrap_or_else(|e| panic!("{e}: {}", r.content))
}

fn term(t: &mut Task, command: &str) -> (Value, bool) {
    let r = t.call("terminal", &json!({ "command": command }));
    (content(&r), r.is_error)
}

/// Live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rfind(')')
            .is_some_and(|i| stat[i + 2..].starts_with('Z'));
        if !zombie
            && String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains(marker)
        {
            out.push(pid);
        }
    }
    out
}

/// Wait (up to 10 s: the test machine is shared) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "still not true: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------- terminal

#[test]
fn terminal_runs_in_the_workspace() {
    let mut t = local_task(&["terminal", "file"]);
    let ws = t.workspace().to_path_buf();
    let (v, err) = term(
        &mut t,
        "pwd; echo out; echo err >&2; echo hi > made.txt; exit 3",
    );
    assert!(!err);
    assert_eq!(v["exit_code"], 3);
    assert!(v["error"].is_null());
    // The reference's result shape: exactly output, exit_code, error.
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["output", "exit_code", "error"]);
    assert_eq!(v["output"], format!("{}\nout\nerr\n", ws.display()));
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "hi\n"
    );
    // The schema of every offered tool is there, and nothing else.
    let names: Vec<String> = t
        .schemas()
        .iter()
        .map(|s| s["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "terminal",
            "process",
            "read_file",
            "write_file",
            "patch",
            "search_files"
        ]
    );
    // A tool of another toolset, an unknown tool, bad arguments.
    let r = t.call("web_extract", &json!({"urls": ["http://x"]}));
    assert!(
        r.is_error && r.content.contains("no tool named \\\"web_extract\\\""),
        "{}",
        r.content
    );
    let r = t.call("terminal", &json!({}));
    assert!(r.is_error && r.content.contains("missing required argument"));
    let r = t.call("terminal", &json!("ls"));
    assert!(r.is_error);
    drop(t);
    assert!(!ws.exists(), "the workspace is removed with the task");
}

#[test]
fn terminal_timeout_kills_the_whole_group() {
    let sandbox = SandboxConfig {
        timeout: Duration::from_secs(30),
        ..SandboxConfig::default()
    };
    let mut t = task_with(
        &ToolConfig::default(),
        &sandbox,
        &["terminal"],
        &TaskSpec::default(),
    );
    let start = Instant::now();
    // A child in the background, a grandchild in a subshell, and the foreground wait.
    let r = t.sandbox().run_shell(
        "sleep 31001 & (sleep 31002 &) ; echo started; sleep 31003",
        None,
        Some(Duration::from_secs(2)),
    );
    let out = r.unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(out.timed_out);
    assert_eq!(out.exit_code, 124);
    assert_eq!(out.output, "started\n");
    eventually("the process group is gone", || {
        group_members(out.pgid).is_empty()
    });
    for m in ["sleep 31001", "sleep 31002", "sleep 31003"] {
        assert!(processes_with(m).is_empty(), "{m} survived");
    }
    // Through the tool: the timeout argument, capped by the configured one.
    let r = t.call("terminal", &json!({"command": "sleep 31004", "timeout": 1}));
    assert!(r.is_error);
    let v = content(&r);
    assert_eq!(v["exit_code"], 124);
    assert!(
        v["error"].as_str().unwrap().contains("timed out after 1s"),
        "{v}"
    );
    assert!(processes_with("sleep 31004").is_empty());
}

#[test]
fn background_processes_are_not_left_behind() {
    let mut t = local_task(&["terminal"]);
    let start = Instant::now();
    let (v, err) = term(&mut t, "sleep 31011 & echo $! > bg.pid; echo done");
    assert!(!err);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "did not wait for the background job"
    );
    assert_eq!(v["exit_code"], 0);
    let out = v["output"].as_str().unwrap();
    assert!(out.starts_with("done\n"), "{out}");
    // Without a PID namespace traj finds and stops the leftovers itself and says so;
    // inside one the kernel kills them with the namespace (no note).
    if matches!(super::ns::view(), super::ns::View::Host(_)) {
        assert!(out.contains("stopped when the command ended"), "{out}");
    }
    eventually("the background sleep is gone", || {
        processes_with("sleep 31011").is_empty()
    });
    // A daemon that left the group (setsid) is killed when the task ends.
    let (v, _) = term(
        &mut t,
        "setsid sleep 31012 > /dev/null 2>&1 < /dev/null & echo ok",
    );
    assert_eq!(v["exit_code"], 0);
    drop(t);
    eventually("the setsid daemon is gone", || {
        processes_with("sleep 31012").is_empty()
    });
}

#[test]
fn long_output_is_cut_with_a_note() {
    let sandbox = SandboxConfig {
        output_cap: 1000,
        ..SandboxConfig::default()
    };
    let mut t = task_with(
        &ToolConfig::default(),
        &sandbox,
        &["terminal"],
        &TaskSpec::default(),
    );
    let (v, _) = term(&mut t, "echo FIRST; seq 1 100000; echo LAST");
    let out = v["output"].as_str().unwrap();
    assert!(out.len() < 1200, "{} bytes", out.len());
    assert!(out.starts_with("FIRST\n1\n2\n"));
    assert!(out.ends_with("100000\nLAST\n"), "{out}");
    assert!(
        out.contains("[... output truncated: 588906 bytes in total"),
        "{out}"
    );
    assert_eq!(v["exit_code"], 0);
}

/// A tool process cannot see the caller's environment: this test re-runs itself
/// with an API key set, and the child checks what commands see.
#[test]
fn tools_never_see_the_callers_environment() {
    const SECRET: &str = "sk-test-6f1e0c2b9a";
    if std::env::var("TRAJ_ENV_CHILD").is_err() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "toolbox::tests::tools_never_see_the_callers_environment",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TRAJ_ENV_CHILD", "1")
            .env("OPENAI_API_KEY", SECRET)
            .env("TRAJ_PASSED", "visible-by-request")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    assert_eq!(std::env::var("OPENAI_API_KEY").unwrap(), SECRET);
    let allow = SandboxConfig {
        env_allow: vec!["TRAJ_PASSED".into()],
        env_set: vec![("MY_SETTING".into(), "on".into())],
        ..SandboxConfig::default()
    };
    let mut backends = vec![SandboxConfig::default(), allow.clone()];
    backends.push(SandboxConfig {
        env_allow: allow.env_allow.clone(),
        env_set: allow.env_set.clone(),
        ..bwrap_config()
    });
    for (i, sandbox) in backends.iter().enumerate() {
        let cfg = ToolConfig {
            python: Some(true),
            ..ToolConfig::default()
        };
        let mut t = task_with(
            &cfg,
            sandbox,
            &["terminal", "code_execution"],
            &TaskSpec::default(),
        );
        let (v, _) = term(
            &mut t,
            "env; echo \"key=$OPENAI_API_KEY\"; cat /proc/$$/environ | tr '\\0' '\\n'",
        );
        let out = v["output"].as_str().unwrap();
        assert!(!out.contains(SECRET), "backend {i}: the key leaked:\n{out}");
        assert!(out.contains("key=\n"), "{out}");
        assert!(out.contains("PATH=/usr/local/sbin:"), "{out}");
        assert!(!out.contains("TRAJ_ENV_CHILD"), "{out}");
        if i > 0 {
            assert!(out.contains("TRAJ_PASSED=visible-by-request"), "{out}");
            assert!(out.contains("MY_SETTING=on"), "{out}");
        } else {
            assert!(!out.contains("TRAJ_PASSED"), "{out}");
        }
        let r = t.call("execute_code", &json!({"code": "import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))"}));
        let v = content(&r);
        assert!(!v["output"].as_str().unwrap().contains(SECRET), "{v}");
        assert!(v["output"].as_str().unwrap().ends_with("None\n"), "{v}");
    }
}

// ---------------------------------------------------------------- cwd and docker

#[test]
fn cwd_applies_and_stays_inside() {
    let spec = TaskSpec {
        image: None,
        cwd: Some("proj/src".into()),
    };
    let mut t = task_with(
        &ToolConfig::default(),
        &SandboxConfig::default(),
        &["terminal", "file"],
        &spec,
    );
    let ws = t.workspace().to_path_buf();
    let (v, _) = term(&mut t, "pwd; echo x > here.txt");
    assert_eq!(v["output"], format!("{}/proj/src\n", ws.display()));
    // File tools start from the same directory.
    let r = t.call("read_file", &json!({"path": "here.txt"}));
    assert_eq!(content(&r)["content"], "1|x\n");
    assert!(
        !t.call("read_file", &json!({"path": "../../../x"}))
            .content
            .is_empty()
    );
    // In bwrap, the same cwd is seen under /workspace.
    let mut t = task_with(
        &ToolConfig::default(),
        &bwrap_config(),
        &["terminal"],
        &spec,
    );
    let (v, _) = term(&mut t, "pwd");
    assert_eq!(v["output"], "/workspace/proj/src\n");
    for bad in ["/etc", "../up", "/tmp/elsewhere"] {
        let spec = TaskSpec {
            image: None,
            cwd: Some(bad.into()),
        };
        let e = Registry::builtin(&ToolConfig::default()).task(
            &sets(&["terminal"]),
            &SandboxConfig::default(),
            &spec,
        );
        assert!(e.is_err(), "{bad}");
    }
}

/// No docker engine runs here: a fake docker CLI logs its arguments and runs `exec`
/// commands locally, so the whole flow (run, exec, rm) and its command lines are
/// checked.
#[test]
fn docker_backend_command_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let fake = dir.path().join("fake-docker");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s' \"$*\" | tr '\\n' '~' >> {log}; echo >> {log}\ncase \"$1\" in\n  run) echo 0123abcd ;;\n  exec) shift; while [ \"${{1#-}}\" != \"$1\" ]; do case \"$1\" in -w|-e) shift 2 ;; *) shift ;; esac; done; shift; exec \"$@\" ;;\nesac\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let sandbox = SandboxConfig {
        docker_cli: fake.display().to_string(),
        docker_args: vec!["--memory".into(), "1g".into()],
        ..SandboxConfig::default()
    };
    let spec = TaskSpec {
        image: Some("python:3.12-slim".into()),
        cwd: Some("/app".into()),
    };
    let mut t = task_with(&ToolConfig::default(), &sandbox, &["terminal"], &spec);
    assert_eq!(t.sandbox().backend(), Backend::Docker);
    let ws = t.workspace().display().to_string();
    let (v, _) = term(&mut t, "echo from-container");
    assert_eq!(v["output"], "from-container\n");
    let (v, _) = term(&mut t, "exit 4");
    assert_eq!(v["exit_code"], 4);
    drop(t);
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    let name = lines[0].split_whitespace().nth(4).unwrap().to_string();
    assert!(name.starts_with("traj-"));
    assert_eq!(
        lines[0],
        format!(
            "run -d --init --name {name} --network none -v {ws}:/workspace -w /app --memory 1g -- python:3.12-slim sleep infinity"
        )
    );
    assert!(
        lines[1].starts_with(&format!(
            "exec -i -w /app -e PATH={} -e HOME=/workspace",
            registry::SANDBOX_PATH
        )),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].ends_with(&format!(
            "-e PYTHONUNBUFFERED=1 {name} /bin/sh -c exec 2>&1~echo from-container"
        )),
        "{}",
        lines[1]
    );
    assert_eq!(lines[3], format!("rm -f {name}"));
    // With network, and a relative cwd.
    let sandbox = SandboxConfig {
        network: true,
        ..sandbox
    };
    let spec = TaskSpec {
        image: Some("alpine".into()),
        cwd: Some("sub".into()),
    };
    let mut s = Sandbox::new(&sandbox, spec.image.as_deref(), spec.cwd.as_deref()).unwrap();
    let args = s.docker_run_args().join(" ");
    assert!(!args.contains("--network"), "{args}");
    assert!(args.contains("-w /workspace/sub"), "{args}");
    assert!(s.workspace().join("sub").is_dir());
    // A missing CLI is reported when the task is made.
    let e = Sandbox::new(
        &SandboxConfig {
            docker_cli: "/nonexistent/docker".into(),
            ..SandboxConfig::default()
        },
        Some("alpine"),
        None,
    );
    assert!(format!("{:#}", e.err().unwrap()).contains("is not installed"));
    // An image that the CLI would read as an option is refused.
    let e = Sandbox::new(&sandbox, Some("--privileged"), None);
    assert!(
        format!("{:#}", e.err().unwrap()).contains("starts with '-'"),
        "refused"
    );
    // The docker backend without any image is a configuration error.
    let e = Sandbox::new(
        &SandboxConfig {
            backend: Backend::Docker,
            ..SandboxConfig::default()
        },
        None,
        None,
    );
    assert!(e.is_err());
}

// ---------------------------------------------------------------- bwrap

#[test]
fn bwrap_isolates_the_host() {
    let sandbox = bwrap_config();
    let host_secret_dir = tempfile::tempdir().unwrap();
    std::fs::write(host_secret_dir.path().join("secret.txt"), "host data").unwrap();
    let mut t = task_with(
        &ToolConfig::default(),
        &sandbox,
        &["terminal", "file"],
        &TaskSpec::default(),
    );
    let ws = t.workspace().to_path_buf();
    let (v, _) = term(&mut t, "pwd; echo inside > a.txt; cat a.txt; echo $HOME");
    assert_eq!(v["output"], "/workspace\ninside\n/workspace\n");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "inside\n"
    );
    // Host system directories are read-only; nothing else of the host is visible.
    for target in ["/etc/traj-test", "/usr/traj-test", "/bin/traj-test"] {
        let (v, _) = term(&mut t, &format!("echo x > {target}"));
        assert_ne!(v["exit_code"], 0, "{target} was writable: {v}");
        assert!(!Path::new(target).exists());
    }
    let secret = host_secret_dir.path().join("secret.txt");
    let (v, _) = term(&mut t, &format!("cat {}", secret.display()));
    assert_ne!(v["exit_code"], 0, "host /tmp visible: {v}");
    let (v, _) = term(
        &mut t,
        "ls /root /home 2>&1; echo tmp > /tmp/t && cat /tmp/t",
    );
    assert!(
        v["output"].as_str().unwrap().contains("No such file"),
        "{v}"
    );
    assert!(v["output"].as_str().unwrap().ends_with("tmp\n"), "{v}");
    // File tools accept the sandbox's view of paths.
    let r = t.call("read_file", &json!({"path": "/workspace/a.txt"}));
    assert_eq!(content(&r)["content"], "1|inside\n");
}

#[test]
fn bwrap_has_no_network_unless_asked() {
    let sandbox = bwrap_config();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            drop(c);
        }
    });
    let probe = format!(
        "python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), 2); print('connected')\"; \
         python3 -c \"import socket; socket.getaddrinfo('example.com', 80); print('resolved')\"; \
         cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"
    );
    let mut t = task_with(
        &ToolConfig::default(),
        &sandbox,
        &["terminal"],
        &TaskSpec::default(),
    );
    let (v, _) = term(&mut t, &probe);
    let out = v["output"].as_str().unwrap();
    assert!(!out.contains("connected"), "{out}");
    assert!(!out.contains("resolved"), "{out}");
    assert!(out.ends_with("\nlo\n"), "only loopback: {out}");
    // With network on, the same probe reaches the host's loopback: the probe works.
    let open = SandboxConfig {
        network: true,
        ..sandbox
    };
    let mut t = task_with(
        &ToolConfig::default(),
        &open,
        &["terminal"],
        &TaskSpec::default(),
    );
    let (v, _) = term(&mut t, &probe);
    assert!(v["output"].as_str().unwrap().contains("connected"), "{v}");
}

#[test]
fn bwrap_timeout_kills_everything() {
    let sandbox = bwrap_config();
    let mut t = task_with(
        &ToolConfig::default(),
        &sandbox,
        &["terminal"],
        &TaskSpec::default(),
    );
    let start = Instant::now();
    let out = t
        .sandbox()
        .run_shell(
            "sleep 31021 & setsid sleep 31022 & sleep 31023",
            None,
            Some(Duration::from_secs(1)),
        )
        .unwrap();
    assert!(out.timed_out);
    assert!(start.elapsed() < Duration::from_secs(5));
    eventually("the group is gone", || group_members(out.pgid).is_empty());
    for m in ["sleep 31021", "sleep 31022", "sleep 31023"] {
        eventually(m, || processes_with(m).is_empty());
    }
    // Leftovers after a normal end die with the sandbox's PID namespace.
    let (v, _) = term(&mut t, "setsid sleep 31024 > /dev/null 2>&1 & echo ok");
    assert_eq!(v["exit_code"], 0);
    eventually("the bwrap leftover is gone", || {
        processes_with("sleep 31024").is_empty()
    });
}

// ---------------------------------------------------------------- execute_code

#[test]
fn execute_code_runs_python_in_the_sandbox() {
    let cfg = ToolConfig {
        python: Some(true),
        ..ToolConfig::default()
    };
    for sandbox in [SandboxConfig::default(), bwrap_config()] {
        let mut t = task_with(&cfg, &sandbox, &["code_execution"], &TaskSpec::default());
        let r = t.call("execute_code", &json!({"code": "import os\nopen('out.txt','w').write('42')\nprint(sum(range(10)), os.getcwd() == os.environ['HOME'])"}));
        assert!(!r.is_error);
        let v = content(&r);
        assert_eq!(v["output"], "45 True\n");
        assert_eq!(v["exit_code"], 0);
        assert_eq!(
            std::fs::read_to_string(t.workspace().join("out.txt")).unwrap(),
            "42"
        );
        let r = t.call(
            "execute_code",
            &json!({"code": "def f():\n    raise ValueError('bad input')\nf()"}),
        );
        assert!(
            !r.is_error,
            "an exception is the program's result, not a tool failure"
        );
        let v = content(&r);
        assert_eq!(v["exit_code"], 1);
        let out = v["output"].as_str().unwrap();
        assert!(
            out.contains("ValueError: bad input") && out.contains("Traceback"),
            "{out}"
        );
        let r = t.call("execute_code", &json!({"code": "import time\nprint('begin', flush=True)\ntime.sleep(30)", "timeout": 3}));
        assert!(r.is_error);
        assert_eq!(content(&r)["output"], "begin\n");
        let r = t.call("execute_code", &json!({"code": ""}));
        assert!(r.is_error);
    }
}

mod tools;
