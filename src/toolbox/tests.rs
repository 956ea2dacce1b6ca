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
            "run -d --init --name {name} --network none -v {ws}:/workspace -w /app --memory 1g python:3.12-slim sleep infinity"
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

// ---------------------------------------------------------------- file tools via Task

#[test]
fn file_tools_through_the_task() {
    let mut t = local_task(&["file", "terminal"]);
    let outside = tempfile::tempdir().unwrap();
    let r = t.call(
        "write_file",
        &json!({"path": "pkg/mod.py", "content": "def add(a, b):\n    return a - b\n"}),
    );
    assert!(!r.is_error, "{}", r.content);
    let r = t.call(
        "patch",
        &json!({"path": "pkg/mod.py", "old_string": "a - b", "new_string": "a + b"}),
    );
    assert!(!r.is_error, "{}", r.content);
    let r = t.call("search_files", &json!({"pattern": "a \\+ b"}));
    assert_eq!(
        content(&r)["matches"],
        json!(["pkg/mod.py:2:    return a + b"])
    );
    let r = t.call(
        "search_files",
        &json!({"pattern": "*.py", "target": "files"}),
    );
    assert_eq!(content(&r)["files"], json!(["pkg/mod.py"]));
    // A symlink made by a command cannot be used to leave the workspace.
    let (v, _) = term(&mut t, &format!("ln -s {} out", outside.path().display()));
    assert_eq!(v["exit_code"], 0);
    let r = t.call(
        "write_file",
        &json!({"path": "out/evil.txt", "content": "x"}),
    );
    assert!(r.is_error && r.content.contains("refused"), "{}", r.content);
    assert!(!outside.path().join("evil.txt").exists());
    let r = t.call("read_file", &json!({"path": "/etc/hostname"}));
    assert!(r.is_error && r.content.contains("refused"), "{}", r.content);
}

// ---------------------------------------------------------------- web tools

fn page_server() -> String {
    let article = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/web/article.html"),
    )
    .unwrap();
    serve(move |req: &Request| -> Reply {
        match req.path() {
            "/posts/process-groups" => (200, "text/html; charset=utf-8", article.clone(), vec![]),
            "/old" => (
                301,
                "text/html",
                b"moved".to_vec(),
                vec![("Location".into(), "/posts/process-groups".into())],
            ),
            "/notes.txt" => (200, "text/plain", b"plain notes\nline 2\n".to_vec(), vec![]),
            "/logo.png" => (200, "image/png", b"\x89PNG\r\n\x1a\nxxxx".to_vec(), vec![]),
            _ => (404, "text/html", b"<h1>Not Found</h1>".to_vec(), vec![]),
        }
    })
}

fn open_web() -> ToolConfig {
    ToolConfig {
        allow_private_addresses: true,
        ..ToolConfig::default()
    }
}

#[test]
fn web_extract_reads_pages() {
    let base = page_server();
    let mut t = task_with(
        &open_web(),
        &SandboxConfig::default(),
        &["web"],
        &TaskSpec::default(),
    );
    assert_eq!(
        t.offered(),
        ["web_extract"],
        "no search provider configured"
    );
    let r = t.call("web_extract", &json!({"urls": [format!("{base}/old"), format!("{base}/notes.txt"), format!("{base}/missing")]}));
    assert!(!r.is_error, "{}", r.content);
    let v = content(&r);
    let page = &v["results"][0];
    assert_eq!(
        page["url"],
        format!("{base}/posts/process-groups"),
        "redirect followed"
    );
    assert_eq!(
        page["title"],
        "Understanding Process Groups & Sessions | Systems Notes"
    );
    let text = page["content"].as_str().unwrap();
    assert!(
        text.starts_with(
            "Understanding Process Groups & Sessions\nPosted on March 2, 2024 by Jane Doe\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("The group\u{2019}s ID is the PID of its leader."),
        "{text}"
    );
    assert!(
        text.contains("- setsid() starts a new session and group"),
        "{text}"
    );
    assert!(
        text.contains("kill the group \u{2014} not the process."),
        "{text}"
    );
    for junk in [
        "gtag",
        "cookie",
        "Archive",
        "Related posts",
        "Privacy",
        "ad slot",
        "<",
        "schema.org",
    ] {
        assert!(!text.contains(junk), "{junk} in {text}");
    }
    assert_eq!(v["results"][1]["content"], "plain notes\nline 2\n");
    assert!(
        v["results"][2]["error"]
            .as_str()
            .unwrap()
            .contains("HTTP 404")
    );
    // Every URL failing is a failed call.
    for (url, why) in [
        (format!("{base}/logo.png"), "not text"),
        ("file:///etc/passwd".to_string(), "only http and https"),
        ("http://127.0.0.1:1/".to_string(), "127.0.0.1:1"),
    ] {
        let r = t.call("web_extract", &json!({"urls": [url]}));
        assert!(
            r.is_error && r.content.contains(why),
            "{why}: {}",
            r.content
        );
    }
    // By default, local and private addresses are refused.
    let mut t = local_task(&["web"]);
    let r = t.call(
        "web_extract",
        &json!({"urls": [format!("{base}/notes.txt")]}),
    );
    assert!(r.is_error && r.content.contains("refused"), "{}", r.content);
}

fn search_server() -> String {
    let fixture = |n: &str| {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/web")
                .join(n),
        )
        .unwrap()
    };
    let (searx, brave, tavily) = (
        fixture("searxng.json"),
        fixture("brave.json"),
        fixture("tavily.json"),
    );
    serve(move |req: &Request| -> Reply {
        let json = "application/json";
        match (req.method.as_str(), req.path()) {
            ("GET", "/search") if req.query("format").as_deref() == Some("json") => {
                assert_eq!(req.query("q").as_deref(), Some("process group timeout"));
                (200, json, searx.clone(), vec![])
            }
            ("GET", "/res/v1/web/search") => {
                if req.headers.get("x-subscription-token").map(String::as_str) != Some("brave-key")
                {
                    return (401, json, br#"{"error":"unauthorized"}"#.to_vec(), vec![]);
                }
                (200, json, brave.clone(), vec![])
            }
            ("POST", "/search") => {
                if req.headers.get("authorization").map(String::as_str) != Some("Bearer tvly-key") {
                    return (401, json, br#"{"detail":"Unauthorized"}"#.to_vec(), vec![]);
                }
                let body: Value = serde_json::from_slice(&req.body).unwrap();
                assert_eq!(body["query"], "process group timeout");
                (200, json, tavily.clone(), vec![])
            }
            _ => (500, "text/plain", b"boom".to_vec(), vec![]),
        }
    })
}

#[test]
fn web_search_speaks_searxng_brave_and_tavily() {
    let base = search_server();
    for (provider, key) in [
        (SearchProvider::Searxng, None),
        (SearchProvider::Brave, Some("brave-key")),
        (SearchProvider::Tavily, Some("tvly-key")),
    ] {
        let cfg = ToolConfig {
            search: Some(SearchConfig {
                provider,
                base_url: base.clone(),
                api_key: key.map(str::to_string),
                max_results: 5,
            }),
            ..open_web()
        };
        let mut t = task_with(
            &cfg,
            &SandboxConfig::default(),
            &["web"],
            &TaskSpec::default(),
        );
        assert_eq!(t.offered(), ["web_search", "web_extract"]);
        let r = t.call(
            "web_search",
            &json!({"query": "process group timeout", "limit": 2}),
        );
        assert!(!r.is_error, "{provider:?}: {}", r.content);
        let v = content(&r);
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{provider:?}: {v}");
        assert_eq!(
            results[0]["url"],
            "https://example.org/posts/process-groups"
        );
        assert_eq!(
            results[0]["title"], "Understanding Process Groups & Sessions",
            "{provider:?}"
        );
        assert!(
            results[0]["snippet"]
                .as_str()
                .unwrap()
                .starts_with("Killing only the leader"),
            "{provider:?}: {v}"
        );
        assert_eq!(results[1]["title"], "setpgid(2) - Linux manual page");
        let r = t.call("web_search", &json!({"query": "  "}));
        assert!(r.is_error);
        if key.is_some() {
            // A wrong key is an error the model sees, not an empty result.
            let mut bad = cfg.clone();
            bad.search.as_mut().unwrap().api_key = Some("wrong".into());
            let mut t = task_with(
                &bad,
                &SandboxConfig::default(),
                &["web"],
                &TaskSpec::default(),
            );
            let r = t.call("web_search", &json!({"query": "process group timeout"}));
            assert!(
                r.is_error && r.content.contains("HTTP 401"),
                "{}",
                r.content
            );
        }
    }
}

// ---------------------------------------------------------------- model tools

/// A chat-completions stub: answers depend on the model and on what was sent.
fn llm_server() -> String {
    serve(|req: &Request| -> Reply {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let model = body["model"].as_str().unwrap_or("");
        let answer = match model {
            "vision-1" => {
                let parts = &body["messages"][0]["content"];
                let url = parts[1]["image_url"]["url"].as_str().unwrap_or("");
                let kind = if url.starts_with("data:image/png;base64,iVBORw0KGgo") {
                    "inline png"
                } else {
                    url
                };
                format!("{} | {kind}", parts[0]["text"].as_str().unwrap_or(""))
            }
            "ref-a" => "Paris is the capital of France.".to_string(),
            "ref-b" => "The capital is Paris (since 508 AD).".to_string(),
            "ref-broken" => {
                return (
                    400,
                    "application/json",
                    br#"{"error":{"message":"model not found"}}"#.to_vec(),
                    vec![],
                );
            }
            "agg" => {
                let system = body["messages"][0]["content"].as_str().unwrap_or("");
                let n = ["\n\n1. ", "\n\n2. ", "\n\n3. "]
                    .iter()
                    .filter(|m| system.contains(*m))
                    .count();
                format!("combined {n} answers: Paris")
            }
            _ => String::new(),
        };
        let reply = json!({
            "id": "x", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        });
        (
            200,
            "application/json",
            reply.to_string().into_bytes(),
            vec![],
        )
    })
}

fn llm_config(base: &str, moa: &[&str]) -> ToolConfig {
    ToolConfig {
        llm: Some(LlmToolsConfig {
            client: ClientConfig {
                base_url: format!("{base}/v1"),
                api_key: Some("k".into()),
                timeout: Duration::from_secs(10),
                max_retries: 0,
                ..ClientConfig::default()
            },
            vision_model: Some("vision-1".into()),
            moa_models: moa.iter().map(|s| s.to_string()).collect(),
            moa_aggregator: Some("agg".into()),
            max_tokens: Some(256),
        }),
        ..ToolConfig::default()
    }
}

#[test]
fn vision_analyze_sends_images() {
    let base = llm_server();
    let mut t = task_with(
        &llm_config(&base, &["ref-a"]),
        &SandboxConfig::default(),
        &["vision"],
        &TaskSpec::default(),
    );
    assert_eq!(t.offered(), ["vision_analyze"]);
    std::fs::write(
        t.workspace().join("shot.png"),
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
    )
    .unwrap();
    std::fs::write(t.workspace().join("notes.txt"), b"not an image").unwrap();
    let r = t.call(
        "vision_analyze",
        &json!({"image_url": "shot.png", "question": "What color?"}),
    );
    assert_eq!(
        content(&r)["analysis"],
        "What color? | inline png",
        "{}",
        r.content
    );
    let r = t.call(
        "vision_analyze",
        &json!({"image_url": "https://example.org/cat.jpg", "question": "Animal?"}),
    );
    assert_eq!(
        content(&r)["analysis"],
        "Animal? | https://example.org/cat.jpg"
    );
    let r = t.call(
        "vision_analyze",
        &json!({"image_url": "notes.txt", "question": "?"}),
    );
    assert!(
        r.is_error && r.content.contains("not a PNG"),
        "{}",
        r.content
    );
    let r = t.call(
        "vision_analyze",
        &json!({"image_url": "../../etc/passwd", "question": "?"}),
    );
    assert!(r.is_error && r.content.contains("refused"), "{}", r.content);
}

#[test]
fn mixture_of_agents_combines_answers() {
    let base = llm_server();
    let mut t = task_with(
        &llm_config(&base, &["ref-a", "ref-broken", "ref-b"]),
        &SandboxConfig::default(),
        &["moa"],
        &TaskSpec::default(),
    );
    let r = t.call(
        "mixture_of_agents",
        &json!({"user_prompt": "Capital of France?"}),
    );
    assert!(!r.is_error, "{}", r.content);
    let v = content(&r);
    assert_eq!(v["response"], "combined 2 answers: Paris");
    assert_eq!(v["models_used"], json!(["ref-a", "ref-b"]));
    assert_eq!(v["failed"][0]["model"], "ref-broken");
    let mut t = task_with(
        &llm_config(&base, &["ref-broken"]),
        &SandboxConfig::default(),
        &["moa"],
        &TaskSpec::default(),
    );
    let r = t.call(
        "mixture_of_agents",
        &json!({"user_prompt": "Capital of France?"}),
    );
    assert!(
        r.is_error && r.content.contains("every reference model failed"),
        "{}",
        r.content
    );
    // Not configured: not offered.
    assert!(local_task(&["moa", "vision"]).offered().is_empty());
}

#[test]
fn task_is_a_send_tool_host() {
    fn host<T: ToolHost + Send + 'static>() {}
    host::<Task>();
}

/// Everything the registry tells traj-run and traj-sample-tools, under a bare and a
/// fully configured [`ToolConfig`]: per toolset its description, includes, every tool
/// (in order) and the schemas offered; per tool its availability. Both configurations
/// decide whether Chromium is there (`chromium: Some(..)`), so the snapshot is the
/// same on every machine; the machine's own answer is tested beside it.
fn registry_snapshot() -> Value {
    let full = ToolConfig {
        search: Some(SearchConfig {
            provider: SearchProvider::Searxng,
            base_url: "http://127.0.0.1:1".into(),
            api_key: None,
            max_results: 5,
        }),
        llm: Some(LlmToolsConfig {
            client: ClientConfig::default(),
            vision_model: Some("v".into()),
            moa_models: vec!["a".into()],
            moa_aggregator: Some("b".into()),
            max_tokens: None,
        }),
        python: Some(true),
        chromium: Some(true),
        ..ToolConfig::default()
    };
    let bare = ToolConfig {
        web_fetch: false,
        python: Some(false),
        chromium: Some(false),
        ..ToolConfig::default()
    };
    let mut out = serde_json::Map::new();
    for (label, cfg) in [("full", &full), ("bare", &bare)] {
        let r = Registry::builtin(cfg);
        let mut by_set = serde_json::Map::new();
        for t in r.toolsets() {
            let all = r.resolve_all(&[t.name.to_string()]).unwrap();
            let offered = r.resolve(&[t.name.to_string()]).unwrap();
            by_set.insert(
                t.name.to_string(),
                json!({
                    "description": t.description,
                    "tools": t.tools,
                    "includes": t.includes,
                    "resolve_all": all,
                    "schemas": r.schemas(&offered),
                }),
            );
        }
        let tools: Vec<Value> = r
            .tools()
            .iter()
            .map(|i| json!([i.name, i.availability.describe(), i.schema]))
            .collect();
        out.insert(
            label.to_string(),
            json!({
                "toolsets": Value::Object(by_set),
                "tools": tools,
                "all": r.resolve_all(&sets(&["all"])).unwrap(),
                "available_toolsets": r.available_toolsets(),
                "drawable_toolsets": r.drawable_toolsets(),
            }),
        );
    }
    out.insert("all_tool_names".into(), json!(all_tool_names()));
    Value::Object(out)
}

/// The tool table must give traj-run the very schemas (request bodies) and toolsets it
/// gave before the table existed: `snapshots/registry.json` was written from the five
/// separate declarations. `TRAJ_BLESS=1` rewrites it (only for a deliberate change).
#[test]
fn registry_matches_its_snapshot() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/toolbox/snapshots/registry.json");
    let now = serde_json::to_string_pretty(&registry_snapshot()).unwrap() + "\n";
    if std::env::var_os("TRAJ_BLESS").is_some() {
        std::fs::write(&path, &now).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("snapshot");
    assert!(now == want, "registry differs from {}", path.display());
}

// ---------------------------------------------------------------- survivors and limits

/// Processes that left the call's group and its directory, and a double-forked
/// daemon, die when the call ends (local mode: traj is their subreaper), before the
/// next call and without waiting for the task to end.
#[test]
fn setsid_and_double_fork_daemons_do_not_survive_the_call() {
    let mut t = local_task(&["terminal"]);
    let start = Instant::now();
    let (v, err) = term(
        &mut t,
        "(cd / && setsid sh -c 'exec sleep 31021 &'); echo started",
    );
    assert!(!err, "{v}");
    assert!(v["output"].as_str().unwrap().starts_with("started"), "{v}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "waited for the daemon"
    );
    assert!(
        processes_with("sleep 31021").is_empty(),
        "setsid daemon survived the call"
    );
    let (v, _) = term(
        &mut t,
        "sh -c 'cd / && sh -c \"setsid sleep 31022 </dev/null >/dev/null 2>&1 &\" &'; sleep 0.2; echo ok",
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(
        processes_with("sleep 31022").is_empty(),
        "double-fork daemon survived the call"
    );
    // Another task's daemon is not its business: each task kills only its own.
    let mut other = local_task(&["terminal"]);
    let (v, _) = term(&mut other, "echo $HOME");
    assert!(v["output"].as_str().unwrap().contains("traj-task-"), "{v}");
    drop(other);
    drop(t);
}

/// The same through bwrap: the PID namespace dies with the command's sandbox.
#[test]
fn bwrap_daemons_do_not_survive_the_call() {
    let mut t = task_with(
        &ToolConfig::default(),
        &bwrap_config(),
        &["terminal"],
        &TaskSpec::default(),
    );
    let (v, _) = term(
        &mut t,
        "(cd / && setsid sh -c 'exec sleep 31023 &'); echo started",
    );
    assert!(v["output"].as_str().unwrap().contains("started"), "{v}");
    eventually("the bwrap daemon is gone", || {
        processes_with("sleep 31023").is_empty()
    });
}

fn limited_task(limits: Limits) -> Task {
    let sandbox = SandboxConfig {
        limits,
        ..SandboxConfig::default()
    };
    task_with(
        &ToolConfig {
            python: Some(true),
            ..ToolConfig::default()
        },
        &sandbox,
        &["terminal", "code_execution"],
        &TaskSpec::default(),
    )
}

/// Each limit holds and is a tool error the model sees; the task goes on.
#[test]
fn per_call_limits_hold_and_are_reported() {
    let mut t = limited_task(Limits {
        memory_mb: 256,
        processes: 0,
        file_size_mb: 1,
        cpu_secs: 1,
    });
    let (v, err) = term(
        &mut t,
        "head -c 3000000 /dev/zero > big; ls -l big | cut -d' ' -f5",
    );
    assert!(err, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("file size limit"),
        "{v}"
    );
    assert!(std::fs::metadata(t.workspace().join("big")).unwrap().len() <= 1 << 20);
    let (v, err) = term(&mut t, "while :; do :; done");
    assert!(err, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("CPU time limit"),
        "{v}"
    );
    let r = t.call(
        "execute_code",
        &json!({"code": "x = bytearray(1 << 30)\nprint(len(x))"}),
    );
    let v = content(&r);
    assert!(r.is_error, "{v}");
    assert!(v["error"].as_str().unwrap().contains("memory limit"), "{v}");
    // Within the limits all is as before.
    let (v, err) = term(&mut t, "echo fine");
    assert!(!err && v["output"] == "fine\n", "{v}");
    // The process limit (not enforced for root, who has CAP_SYS_RESOURCE).
    if !rustix::process::getuid().is_root() {
        let mut t = limited_task(Limits {
            processes: 1,
            ..Limits::NONE
        });
        let (v, _) = term(&mut t, "sleep 1 & sleep 1 & sleep 1 & wait");
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|e| e.contains("process limit")),
            "{v}"
        );
    }
}

/// `--sandbox auto` settles on bwrap where it works (here: the tests need it).
#[test]
fn auto_uses_bwrap_where_it_works() {
    bwrap_config();
    let mut cfg = SandboxConfig {
        backend: Backend::Auto,
        ..SandboxConfig::default()
    };
    assert_eq!(cfg.resolve_auto(), None);
    assert_eq!(cfg.backend, Backend::Bwrap);
    let mut t = task_with(
        &ToolConfig::default(),
        &SandboxConfig {
            backend: Backend::Auto,
            ..SandboxConfig::default()
        },
        &["terminal"],
        &TaskSpec::default(),
    );
    assert_eq!(t.sandbox().backend(), Backend::Bwrap);
    let (v, _) = term(&mut t, "pwd");
    assert_eq!(v["output"], "/workspace\n");
}
