//! traj-run's container tasks against a logging stand-in for the docker CLI: what a
//! task row's `image` can make of the CLI's command line.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::standin::Standin;
use crate::util::*;

#[test]
fn an_image_that_reads_as_an_option_is_a_bad_task_never_given_to_the_cli() {
    // Once passed as it was: `image inspect --privileged`, then
    // `run ... --privileged sleep infinity`.
    let d = tmpdir();
    let log = d.path().join("log");
    let cli = d.path().join("fake-docker");
    std::fs::write(
        &cli,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {}\necho 0123abcd\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rows = [
        json!({"prompt": "p-option", "image": "--privileged", "toolsets": ["terminal"]}),
        json!({"prompt": "p-option2", "docker_image": "-v/:/host", "toolsets": ["terminal"]}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("tasks.jsonl"), text).unwrap();
    let s = Standin::json(json!({}));
    let mut c = standin_run(d.path(), &s.url(), "r");
    c.args(["-q", "tasks.jsonl", "--docker-cli", cli.to_str().unwrap()]);
    let o = run(c);
    assert_code(&o, 1);
    let fails = failures(&d.path().join("r"));
    assert_eq!(fails.len(), 2, "{fails:?}");
    for f in &fails {
        assert_eq!(f["class"], "bad_task", "{f}");
        assert_eq!(f["retryable"], false, "{f}");
        assert!(
            f["error"].as_str().unwrap().contains("starts with '-'"),
            "{f}"
        );
    }
    assert_eq!(s.count(), 0, "no model call");
    assert!(
        !log.exists(),
        "the CLI was called: {:?}",
        std::fs::read_to_string(&log)
    );
    // The flag's own image is a usage error.
    let mut c = standin_run(d.path(), &s.url(), "r2");
    c.args([
        "-q",
        "tasks.jsonl",
        "--sandbox",
        "docker",
        "--docker-image=--privileged",
    ]);
    let o = run(c);
    assert_code(&o, 2);
    assert_stderr_has(&o, "--docker-image: image \"--privileged\" starts with '-'");
}
