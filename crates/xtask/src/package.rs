//! The npm package `lull-web`: wasm-pack builds for `web` and `bundler`,
//! the package.json and README from `crates/lull-web`, then `npm pack`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::steps;

/// Build and pack; returns the tarball.
pub fn web(root: &Path) -> Result<PathBuf, String> {
    let krate = root.join("crates/lull-web");
    let out = root.join("target/npm/lull-web");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    // wasm-opt from npm `binaryen`: Debian's older one breaks wasm-bindgen output.
    let tools = root.join("tests/web/node_modules/.bin");
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    for target in ["web", "bundler"] {
        let mut build = Command::new("wasm-pack");
        build
            .args(["build", "--release", "--no-pack", "--no-gitignore", "--target", target, "--out-name", "lull_web"])
            .arg("--out-dir")
            .arg(out.join(target))
            .arg(&krate)
            .env("PATH", &path);
        steps::run(&format!("wasm-pack build ({target})"), root, &mut build)?;
    }
    for (from, name) in [(krate.join("js/package.json"), "package.json"), (krate.join("README.md"), "README.md")] {
        std::fs::copy(&from, out.join(name)).map_err(|e| format!("{}: {e}", from.display()))?;
    }
    let version = env!("CARGO_PKG_VERSION");
    let manifest = std::fs::read_to_string(out.join("package.json")).map_err(|e| e.to_string())?;
    if !manifest.contains(&format!("\"version\": \"{version}\"")) {
        return Err(format!("crates/lull-web/js/package.json must have version {version}, as the workspace"));
    }
    let mut pack = Command::new("npm");
    pack.args(["pack", "--silent", "--pack-destination"]).arg(root.join("target/npm"));
    steps::run("npm pack", &out, &mut pack)?;
    Ok(root.join(format!("target/npm/lull-web-{version}.tgz")))
}
