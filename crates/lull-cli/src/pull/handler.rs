//! One window handed to the handler command: run directly (no shell), the
//! window's JSON on stdin, its idempotency key and attempt in the
//! environment, stopped at the handler timeout or when asked.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// The environment variable holding the window's idempotency key (unchanged).
pub const IDEMPOTENCY_KEY_VAR: &str = "LULL_IDEMPOTENCY_KEY";
/// The environment variable holding the attempt (`Lull-Attempt`).
pub const ATTEMPT_VAR: &str = "LULL_ATTEMPT";

/// How a handler run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Exit code 0: the window is acked.
    Succeeded,
    /// Another exit code.
    Failed(i32),
    /// Killed by a signal (a crash).
    Crashed(i32),
    /// Still running at the handler timeout: stopped.
    TimedOut,
    /// Stopped because the run was interrupted twice.
    Stopped,
    /// It could not be started (not found, not executable, …).
    Unstartable(String),
}

impl Ended {
    /// The word a report uses.
    pub fn word(&self) -> &'static str {
        match self {
            Ended::Succeeded => "acked",
            Ended::Failed(_) => "failed",
            Ended::Crashed(_) => "crashed",
            Ended::TimedOut => "timed_out",
            Ended::Stopped => "stopped",
            Ended::Unstartable(_) => "unstartable",
        }
    }

    /// Its exit code, if it exited.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Ended::Succeeded => Some(0),
            Ended::Failed(code) => Some(*code),
            _ => None,
        }
    }

    /// The signal that ended it, if one did (a crash).
    pub fn signal(&self) -> Option<i32> {
        match self {
            Ended::Crashed(signal) => Some(*signal),
            _ => None,
        }
    }
}

/// The handler command.
#[derive(Clone, Debug)]
pub struct Handler {
    /// The program and its arguments, each kept as given.
    pub command: Vec<OsString>,
    /// The longest one run may take.
    pub timeout: Duration,
}

impl Handler {
    /// Run the handler once for a window; `stop` resolving stops it early.
    /// Returns how it ended and how long it took.
    pub async fn run(
        &self,
        window_json: &str,
        idempotency_key: &str,
        attempt: u32,
        stop: impl std::future::Future<Output = ()>,
    ) -> (Ended, Duration) {
        let began = Instant::now();
        let Some((program, args)) = self.command.split_first() else {
            return (Ended::Unstartable("no command".into()), began.elapsed());
        };
        let mut command = Command::new(program);
        command
            .args(args)
            // Least privilege: the handler gets no credential of lull's.
            .env_remove("CLOUDFLARE_API_TOKEN")
            .env_remove("LULL_TOKEN")
            .env(IDEMPOTENCY_KEY_VAR, idempotency_key)
            .env(ATTEMPT_VAR, attempt.to_string())
            .stdin(Stdio::piped())
            // The handler's output goes to lull's stderr: lull's stdout is its report.
            .stdout(stderr())
            .stderr(Stdio::inherit())
            // Its own process group: a timeout stops whatever it started, and a
            // terminal's Ctrl-C reaches lull, which decides.
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return (Ended::Unstartable(format!("{}: {e}", program.to_string_lossy())), began.elapsed()),
        };
        let stdin = child.stdin.take();
        let group = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
        // The window is written while the timeout runs: a handler that does
        // not read a large window cannot hold the run past its timeout.
        let ran = async {
            if let Some(mut stdin) = stdin {
                // A handler that does not read its stdin may close it: not a failure.
                let _ = stdin.write_all(window_json.as_bytes()).await;
            }
            child.wait().await
        };
        let ended = tokio::select! {
            status = ran => match status {
                Ok(status) => match (status.code(), status.signal()) {
                    (Some(0), _) => Ended::Succeeded,
                    (Some(code), _) => Ended::Failed(code),
                    (None, Some(signal)) => Ended::Crashed(signal),
                    (None, None) => Ended::Failed(-1),
                },
                Err(e) => Ended::Unstartable(e.to_string()),
            },
            () = tokio::time::sleep(self.timeout) => Ended::TimedOut,
            () = stop => Ended::Stopped,
        };
        if matches!(ended, Ended::TimedOut | Ended::Stopped) {
            if let Some(group) = group {
                let _ = killpg(group, Signal::SIGKILL);
            }
            let _ = child.kill().await;
        }
        (ended, began.elapsed())
    }
}

/// lull's stderr, for a child's stdout (or nothing if it cannot be shared).
fn stderr() -> Stdio {
    use std::os::fd::AsFd;
    match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => Stdio::from(fd),
        Err(_) => Stdio::null(),
    }
}
