//! Tests of the file, web and model tools through [`Task`](crate::toolbox::Task), against
//! servers on 127.0.0.1 (the sandbox and terminal tests are the parent module's).

use super::*;

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
