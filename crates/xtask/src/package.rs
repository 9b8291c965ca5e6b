//! The npm package `lull-web`: the two engines (lull-web's wasm, lite and
//! full) built and shrunk with `wasm-opt -Oz`, embedded in the package's JS
//! drivers (`crates/lull-web/js`), with the types and README, then `npm pack`.
//!
//! The drivers are ES modules. Their CommonJS build is generated here, one
//! file per module (esbuild, no bundling) into `cjs/`, so `lull-web`,
//! `lull-web/edge`, `lull-web/react` and `lull-web/vue` share their modules
//! when required as they do when imported. In Node both `import` and
//! `require()` load that build (`node/` holds an ES module wrapper per
//! entry), so a process that does both holds one instance; bundlers take the
//! ES modules either way (the `module` condition), so tree-shaking is as before.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;

/// An engine: the cargo features and profile it is built with, and the
/// marker its bytes (in hex) replace in the JS file that instantiates it.
pub struct Build {
    /// lull-web's cargo features.
    pub features: &'static str,
    /// The cargo profile.
    pub profile: &'static str,
    file: &'static str,
    marker: &'static str,
}

/// lull-web's two engines (lite, full), as shipped: the `lints-engines` suite
/// lints the same builds.
pub const ENGINES: [Build; 2] = [
    Build { features: "module,lite", profile: "wasm-lite", file: "lite.js", marker: "@LITE_WASM@" },
    Build { features: "module,full", profile: "wasm-module", file: "full.js", marker: "@FULL_WASM@" },
];

/// Build one engine; its bytes after `wasm-opt -Oz`.
fn engine(root: &Path, build: &Build, path: &str) -> Result<Vec<u8>, String> {
    let mut cargo = cmd::cargo(&["build", "-p", "lull-web", "--target", "wasm32-unknown-unknown"]);
    cargo.args(["--profile", build.profile, "--features", build.features]);
    cmd::run(&format!("engine ({})", build.features), root, &mut cargo)?;
    let linked = root.join(format!("target/wasm32-unknown-unknown/{}/lull_web.wasm", build.profile));
    let bytes = std::fs::read(&linked).map_err(|e| format!("{}: {e}", linked.display()))?;
    let built = root.join(format!("target/npm/{}.linked.wasm", build.file.trim_end_matches(".js")));
    std::fs::write(&built, without_linker_exports(&bytes)?).map_err(|e| format!("{}: {e}", built.display()))?;
    let out = root.join(format!("target/npm/{}.wasm", build.file.trim_end_matches(".js")));
    // wasm-opt from npm `binaryen` (Debian's is older).
    let wasm_opt = root.join("tests/web/node_modules/.bin/wasm-opt");
    let mut opt = Command::new(&wasm_opt);
    // `--converge` repeats -Oz while it still shrinks; the target-features
    // section only matters to tools that link the module further.
    let shrink = ["-Oz", "--converge", "--strip-target-features"];
    opt.arg(&built).args(shrink).args(["--strip-debug", "--strip-producers", "-o"]).arg(&out).env("PATH", path);
    cmd::run("wasm-opt", root, &mut opt)?;
    // The same, keeping function names: the bench's size breakdown reads it.
    let mut named = Command::new(&wasm_opt);
    named.arg(&built).args(shrink).args(["--debuginfo", "-o"]).arg(out.with_extension("names.wasm")).env("PATH", path);
    cmd::run("wasm-opt (names kept)", root, &mut named)?;
    std::fs::read(&out).map_err(|e| format!("{}: {e}", out.display()))
}

/// The exports the linker adds for tools that extend the module's memory
/// (nothing here does): dropped, so `wasm-opt` can drop what only they keep.
const LINKER_EXPORTS: [&[u8]; 2] = [b"__data_end", b"__heap_base"];

/// `wasm` without [`LINKER_EXPORTS`]: its export section (id 7) rewritten, every other section as it is.
fn without_linker_exports(wasm: &[u8]) -> Result<Vec<u8>, String> {
    fn leb(bytes: &[u8], at: &mut usize) -> Result<usize, String> {
        let (mut value, mut shift) = (0usize, 0);
        loop {
            let byte = *bytes.get(*at).ok_or("a truncated wasm module")?;
            *at += 1;
            value |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 || shift > 28 {
                return Ok(value);
            }
        }
    }
    fn put_leb(out: &mut Vec<u8>, mut value: usize) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            out.push(if value == 0 { byte } else { byte | 0x80 });
            if value == 0 {
                return;
            }
        }
    }
    let header = wasm.get(..8).ok_or("not a wasm module")?;
    let mut out = header.to_vec();
    let mut at = 8;
    while at < wasm.len() {
        let id = wasm[at];
        at += 1;
        let size = leb(wasm, &mut at)?;
        let body = wasm.get(at..at + size).ok_or("a truncated wasm section")?;
        at += size;
        let body = if id == 7 {
            let mut kept = Vec::new();
            let (mut count, mut p) = (0, 0);
            for _ in 0..leb(body, &mut p)? {
                let start = p;
                let length = leb(body, &mut p)?;
                let name = body.get(p..p + length).ok_or("a truncated export name")?;
                p += length + 1; // the name, then the export's kind
                leb(body, &mut p)?; // its index
                if !LINKER_EXPORTS.contains(&name) {
                    kept.extend_from_slice(&body[start..p]);
                    count += 1;
                }
            }
            let mut section = Vec::new();
            put_leb(&mut section, count);
            section.extend(kept);
            section
        } else {
            body.to_vec()
        };
        out.push(id);
        put_leb(&mut out, body.len());
        out.extend(body);
    }
    Ok(out)
}

/// The package's entry points (`exports`): each has `NAME.js` (ES module),
/// `NAME.d.ts`, `cjs/NAME.js` and `node/NAME.js`.
const ENTRIES: [&str; 4] = ["index", "edge", "react", "vue"];

/// esbuild, as installed in `tests/web`.
fn esbuild(root: &Path) -> Command {
    Command::new(root.join("tests/web/node_modules/.bin/esbuild"))
}

/// The CommonJS build of the package's ES modules in `out`: each module into
/// `out/cjs` as it is (its `require`s name the same files there), a
/// `package.json` saying so, the types beside them, and for each entry an ES
/// module wrapper in `out/node` that re-exports it (what Node's `import` loads).
fn commonjs(root: &Path, out: &Path, modules: &[PathBuf]) -> Result<(), String> {
    let cjs = out.join("cjs");
    let node = out.join("node");
    for dir in [&cjs, &node] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut build = esbuild(root);
    // `--platform=node`: esbuild annotates each file's export names for Node's `import` of CommonJS.
    build
        .args(modules)
        .args(["--format=cjs", "--platform=node", "--log-level=warning"])
        .arg(format!("--outdir={}", cjs.display()));
    cmd::run("the CommonJS build (esbuild)", root, &mut build)?;
    let write = |path: PathBuf, text: &str| std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()));
    write(cjs.join("package.json"), "{ \"type\": \"commonjs\" }\n")?;
    for entry in ENTRIES {
        let types = out.join(format!("{entry}.d.ts"));
        std::fs::copy(&types, cjs.join(format!("{entry}.d.ts"))).map_err(|e| format!("{}: {e}", types.display()))?;
        let file = cjs.join(format!("{entry}.js"));
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        write(node.join(format!("{entry}.js")), &node_wrapper(entry, &text)?)?;
    }
    Ok(())
}

/// The ES module Node's `import` of entry `name` loads: the CommonJS build of
/// the entry (`cjs`, its text) re-exported by name, its default export too.
fn node_wrapper(name: &str, cjs: &str) -> Result<String, String> {
    // esbuild ends a CommonJS file with its export names (for Node's cjs-module-lexer):
    // `0 && (module.exports = {\n  a,\n  b\n});`. A default export is listed only in `__export`.
    let names = cjs
        .split_once("0 && (module.exports = {")
        .and_then(|(_, rest)| rest.split_once("});"))
        .map(|(list, _)| list.split(',').map(str::trim).filter(|n| !n.is_empty()).collect::<Vec<_>>())
        .ok_or(format!("cjs/{name}.js: esbuild did not list its exports"))?;
    let mut text = format!(
        "// lull-web's `{name}` entry for Node's `import`: its CommonJS build, re-exported,\n\
         // so that `import` and `require()` of lull-web share one instance.\n\
         import cjs from '../cjs/{name}.js';\n\nexport const {{ {} }} = cjs;\n",
        names.join(", ")
    );
    if cjs.contains("\n  default: () =>") {
        text.push_str("export default cjs.default;\n");
    }
    Ok(text)
}

/// Build and pack; returns the tarball.
pub fn web(root: &Path) -> Result<PathBuf, String> {
    let krate = root.join("crates/lull-web");
    let out = root.join("target/npm/lull-web");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let path = std::env::var("PATH").unwrap_or_default();
    let js = krate.join("js");
    let sources = std::fs::read_dir(&js).map_err(|e| format!("{}: {e}", js.display()))?;
    // The drivers (ES modules) and their types, by their source names.
    let mut modules = Vec::new();
    for entry in sources {
        let from = entry.map_err(|e| e.to_string())?.path();
        let name = from.file_name().ok_or("a file with no name")?;
        let module = name.to_string_lossy().ends_with(".js");
        if module || name.to_string_lossy().ends_with(".d.ts") {
            std::fs::copy(&from, out.join(name)).map_err(|e| format!("{}: {e}", from.display()))?;
        }
        if module {
            modules.push(out.join(name));
        }
    }
    modules.sort();
    for build in &ENGINES {
        let encoded: String = engine(root, build, &path)?.iter().map(|b| format!("{b:02x}")).collect();
        let file = out.join(build.file);
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        if text.matches(build.marker).count() != 1 {
            return Err(format!("crates/lull-web/js/{} must hold {} once", build.file, build.marker));
        }
        std::fs::write(&file, text.replace(build.marker, &encoded)).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    for (from, name) in [(js.join("package.json"), "package.json"), (krate.join("README.md"), "README.md")] {
        std::fs::copy(&from, out.join(name)).map_err(|e| format!("{}: {e}", from.display()))?;
    }
    commonjs(root, &out, &modules)?;
    let version = env!("CARGO_PKG_VERSION");
    let manifest = std::fs::read_to_string(out.join("package.json")).map_err(|e| e.to_string())?;
    if !manifest.contains(&format!("\"version\": \"{version}\"")) {
        return Err(format!("crates/lull-web/js/package.json must have version {version}, as the workspace"));
    }
    let mut pack = Command::new("npm");
    pack.args(["pack", "--silent", "--pack-destination"]).arg(root.join("target/npm"));
    cmd::run("npm pack", &out, &mut pack)?;
    Ok(root.join(format!("target/npm/lull-web-{version}.tgz")))
}

/// Put the built package (`package`, e.g. `target/npm/lull-web`) into
/// `dir/node_modules/lull-web`, as `npm install` of its tarball would (a copy:
/// its own `require`s and `import`s then find `dir`'s tooling, e.g. React,
/// walking up from there). Replaces what an earlier run put there.
pub fn install(package: &Path, dir: &Path) -> Result<(), String> {
    fn copy(from: &Path, to: &Path) -> Result<(), String> {
        std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
        for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            let target = to.join(path.file_name().ok_or("a file with no name")?);
            if path.is_dir() {
                copy(&path, &target)?;
            } else {
                std::fs::copy(&path, &target).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        Ok(())
    }
    let installed = dir.join("node_modules/lull-web");
    let _ = std::fs::remove_dir_all(&installed);
    copy(package, &installed)
}

/// The built package bundled into one module, `crates/lull-web/tests/pkg/lull.js`
/// (not committed), where lull-web's browser tests import it: the test
/// runner's server serves the crate's directory beside its own files. One
/// file, not the package's nine: loading the module graph file by file from
/// that server stalled now and then.
pub fn for_browser_tests(root: &Path, package: &Path) -> Result<(), String> {
    let mut esbuild = esbuild(root);
    esbuild
        .arg(package.join("index.js"))
        .args(["--bundle", "--format=esm", "--log-level=warning"])
        .arg(format!("--outfile={}", root.join("crates/lull-web/tests/pkg/lull.js").display()));
    cmd::run("the package as one module for the browser tests (esbuild)", root, &mut esbuild)
}
