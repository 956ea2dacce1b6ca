//! Writes the man pages and shell completions of the binaries, generated from their
//! clap definitions (`make install` runs it):
//!
//! ```sh
//! cargo run --release --example gen-docs -- OUT_DIR
//! # OUT_DIR/man/man1/traj-*.1, OUT_DIR/completions/{bash,zsh,fish}/...
//! ```

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

/// The binaries of this build (traj-run only with the `agent` feature).
fn commands() -> Vec<clap::Command> {
    let data = [
        traj::cmd::normalize::Args::command(),
        traj::cmd::filter::Args::command(),
        traj::cmd::merge::Args::command(),
        traj::cmd::compress::Args::command(),
        traj::cmd::sample::Args::command(),
        traj::cmd::report::Args::command(),
    ];
    #[cfg(feature = "agent")]
    let agent = [traj::cmd::run::Args::command()];
    #[cfg(not(feature = "agent"))]
    let agent: [clap::Command; 0] = [];
    data.into_iter().chain(agent).collect()
}

/// The man page of `cmd`. The examples (the help's after-text) go in an EXAMPLES
/// section as they are, line for line: clap_mangen's own EXTRA section fills and
/// justifies them, which cuts commands in the middle and joins others.
fn man_page(cmd: &clap::Command) -> std::io::Result<Vec<u8>> {
    let after = cmd.get_after_help().map(ToString::to_string);
    let m = clap_mangen::Man::new(cmd.clone().after_help(None::<&'static str>));
    let mut page = Vec::new();
    m.render_title(&mut page)?;
    m.render_name_section(&mut page)?;
    m.render_synopsis_section(&mut page)?;
    m.render_description_section(&mut page)?;
    m.render_options_section(&mut page)?;
    if let Some(text) = after {
        page.extend_from_slice(b".SH EXAMPLES\n.nf\n");
        for line in text.lines() {
            let line = line.replace('\\', "\\e").replace('-', "\\-");
            if line.starts_with(['.', '\'']) {
                page.extend_from_slice(b"\\&");
            }
            page.extend_from_slice(line.as_bytes());
            page.push(b'\n');
        }
        page.extend_from_slice(b".fi\n");
    }
    m.render_version_section(&mut page)?;
    Ok(page)
}

fn write(dir: &Path) -> std::io::Result<()> {
    let man = dir.join("man/man1");
    std::fs::create_dir_all(&man)?;
    for cmd in commands() {
        let name = cmd.get_name().to_string();
        std::fs::write(man.join(format!("{name}.1")), man_page(&cmd)?)?;
        for (shell, sub, file) in [
            (Shell::Bash, "bash", name.clone()),
            (Shell::Zsh, "zsh", format!("_{name}")),
            (Shell::Fish, "fish", format!("{name}.fish")),
        ] {
            let d = dir.join("completions").join(sub);
            std::fs::create_dir_all(&d)?;
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd.clone(), name.clone(), &mut out);
            std::fs::write(d.join(file), out)?;
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gen-docs OUT_DIR");
        return std::process::ExitCode::from(2);
    };
    match write(&dir) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen-docs: {}: {e}", dir.display());
            std::process::ExitCode::from(1)
        }
    }
}
