// The `run` object each bench script writes into its JSON (and BENCH.md's
// header reads): when it ran, on which commit, on what machine. Plain Node,
// no dependencies. `startRun()` when a bench starts, `.end(extra)` when it ends.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";

const root = new URL("..", import.meta.url).pathname;

/** `git …` in the repository, its output trimmed, or null. */
function git(...args) {
  try {
    return execFileSync("git", args, { cwd: root, stdio: ["ignore", "pipe", "ignore"] }).toString().trim();
  } catch {
    return null;
  }
}

/**
 * The commit checked out, and whether tracked files differ from it (BENCH.md
 * aside: the bench rewrites it, so it says nothing of the code measured).
 */
export function commit() {
  const hash = git("rev-parse", "--short", "HEAD");
  const status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)BENCH.md");
  return { hash, uncommitted_changes: status === null ? null : status.length > 0 };
}

/** The machine: CPU model, cores, memory, OS, Node. */
export function machine() {
  let cpu = null;
  try {
    cpu = readFileSync("/proc/cpuinfo", "utf8").match(/^model name\s*:\s*(.+)$/m)?.[1].trim() ?? null;
  } catch {}
  let distro = null;
  try {
    distro = readFileSync("/etc/os-release", "utf8").match(/^PRETTY_NAME="?([^"\n]*)"?$/m)?.[1] ?? null;
  } catch {}
  return {
    cpu: cpu ?? os.cpus()[0]?.model ?? null,
    cores: os.availableParallelism?.() ?? os.cpus().length,
    memory_bytes: os.totalmem(),
    os: `${distro ?? os.type()} (${os.type()} ${os.release()}, ${os.arch()})`,
    node: process.version,
  };
}

/** A run begun now: `end(extra)` gives the `run` object, `extra` (e.g. runtime versions) merged into `machine`. */
export function startRun() {
  const started = new Date();
  const at = commit();
  return {
    end: (extra = {}) => {
      const ended = new Date();
      return {
        date: ended.toISOString(),
        started: started.toISOString(),
        seconds: Math.round((ended - started) / 1000),
        commit: at.hash,
        uncommitted_changes: at.uncommitted_changes,
        machine: { ...machine(), ...extra },
      };
    },
  };
}
