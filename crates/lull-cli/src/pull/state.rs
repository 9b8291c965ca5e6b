//! The durations `lull pull` keeps between runs (its state file), so a run
//! starts from what earlier runs measured rather than from the estimate.
//!
//! One small JSON file per queue, `{"durations_ms": [..]}`, oldest first, at
//! most [`lull_core::DURATION_WINDOW`] numbers; written whole (a temporary
//! file renamed over it) when a run ends. A missing or unreadable file counts
//! as no history (said on stderr); a run never fails for its state file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The state file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    durations_ms: Vec<u64>,
}

/// Where a queue's state lives by default: `$XDG_STATE_HOME/lull/` or
/// `~/.local/state/lull/`, `pull-<queue>.json`; `None` without either.
pub fn default_path(queue_id: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|home| Path::new(&home).join(".local/state"))
    })?;
    let name: String =
        queue_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    Some(base.join("lull").join(format!("pull-{name}.json")))
}

/// The durations kept at `path` (none if it is absent or unreadable).
pub fn load(path: &Path) -> Vec<u64> {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<State>(&bytes) {
            Ok(state) => {
                let keep = state.durations_ms.len().saturating_sub(lull_core::DURATION_WINDOW);
                state.durations_ms[keep..].to_vec()
            }
            Err(e) => {
                eprintln!("lull pull: state file {} is not readable ({e}): starting from the estimate", path.display());
                Vec::new()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            eprintln!("lull pull: state file {}: {e}: starting from the estimate", path.display());
            Vec::new()
        }
    }
}

/// Keep `durations` at `path` for the next run (a warning on failure).
pub fn save(path: &Path, durations: Vec<u64>) {
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_vec(&State { durations_ms: durations }).map_err(std::io::Error::other)?;
        let temporary = path.with_extension("json.tmp");
        std::fs::write(&temporary, text)?;
        std::fs::rename(&temporary, path)
    };
    if let Err(e) = write() {
        eprintln!("lull pull: could not keep durations in {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip_and_a_bad_file_is_no_history() {
        let dir = std::env::temp_dir().join(format!("lull-state-{}", std::process::id()));
        let path = dir.join("pull-q.json");
        assert!(load(&path).is_empty(), "absent");
        save(&path, vec![1, 2, 3]);
        assert_eq!(load(&path), [1, 2, 3]);
        let long: Vec<u64> = (0..lull_core::DURATION_WINDOW as u64 + 5).collect();
        save(&path, long);
        assert_eq!(load(&path).len(), lull_core::DURATION_WINDOW, "only the window is read");
        assert_eq!(load(&path)[0], 5, "the newest kept");
        std::fs::write(&path, "not json").expect("write");
        assert!(load(&path).is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_default_path_names_the_queue_safely() {
        let path = default_path("../q 1").map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        if let Some(name) = path {
            assert_eq!(name.as_deref(), Some("pull-___q_1.json"));
        }
    }
}
