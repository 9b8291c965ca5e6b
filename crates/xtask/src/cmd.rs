//! Running commands as named steps. Imports nothing of this crate, so every
//! other module can use it.

use std::path::Path;
use std::process::Command;

/// Run `cmd` in `dir`, echoing it; an error names the step.
pub fn run(name: &str, dir: &Path, cmd: &mut Command) -> Result<(), String> {
    cmd.current_dir(dir);
    println!("==> {name}: {}", describe(cmd));
    let status = cmd.status().map_err(|e| format!("{name}: cannot start {}: {e}", describe(cmd)))?;
    if status.success() { Ok(()) } else { Err(format!("{name}: {status}")) }
}

/// Run `cmd` and return its standard output, trimmed (`None` if it cannot run or fails).
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `cmd` as a shell line, for the echo and error messages.
pub fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// `cargo` (the one running xtask) with `args`.
pub fn cargo(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args);
    cmd
}
