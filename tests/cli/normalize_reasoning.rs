//! traj-normalize: nothing of a message is lost unsaid, and normalising again changes
//! nothing: `message_keys` keep their order when a row is read again.

use crate::util::*;

const NORM: &str = "traj-normalize";

/// traj-normalize `args` on `input` (stdin); exit 0; stdout.
fn norm(d: &std::path::Path, input: &[u8], args: &[&str]) -> String {
    let mut c = cmd(NORM, d);
    c.arg("-q").args(args);
    let o = run_with_stdin(c, input);
    assert_code(&o, 0);
    stdout(&o)
}

#[test]
fn message_keys_keep_their_order_when_read_again() {
    let d = tmpdir();
    let input = br#"{"messages": [{"role": "user", "content": "x", "name": "alice"}, {"role": "assistant", "content": "y", "loss_weight": 0.5, "weight": 1}]}
"#;
    for args in [&[][..], &["--to", "llamafactory"]] {
        let once = norm(d.path(), input, args);
        assert_eq!(norm(d.path(), once.as_bytes(), args), once, "{args:?}");
    }
}
