//! The npm package `lull-web`: wasm-pack builds for `web` and `bundler`, the
//! ready-on-import entry (`index.js`, the `web` build's wasm embedded), the
//! package.json and README from `crates/lull-web`, then `npm pack`.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;

use crate::steps;

/// UTF-8 for the glue where the environment has no `TextDecoder`/`TextEncoder`
/// (Jest's jsdom): the glue constructs both as it loads.
const TEXT_CODEC: &str =
    "// Jest's jsdom environment has no TextDecoder/TextEncoder: UTF-8 for the few strings that cross.
const TextDecoder = globalThis.TextDecoder ?? class {
  decode(bytes = new Uint8Array()) {
    let s = '';
    for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return decodeURIComponent(escape(s));
  }
};
const TextEncoder = globalThis.TextEncoder ?? class {
  encode(s = '') {
    return Uint8Array.from(unescape(encodeURIComponent(s)), (c) => c.charCodeAt(0));
  }
};
";

/// The package's main entry, `index.js`: the `web` build's glue with its wasm
/// embedded (base64) and instantiated synchronously at import, so no `init()`
/// is needed anywhere (browsers, bundlers with no configuration, Node for SSR,
/// jsdom). The glue's fallback that fetches the `.wasm` file is cut, so no
/// bundler emits that file beside it; `init()` still resolves (at once).
fn ready_entry(glue: &str, wasm: &[u8]) -> Result<String, String> {
    const FETCH: &str = "module_or_path = new URL('lull_web_bg.wasm', import.meta.url);";
    // The glue imports its snippets (our JS) relative to itself, in either quote style.
    const SNIPPETS: [(&str, &str); 2] =
        [("from \"./snippets/", "from \"./web/snippets/"), ("from './snippets/", "from './web/snippets/")];
    if glue.matches(FETCH).count() != 1 || !SNIPPETS.iter().any(|(from, _)| glue.contains(from)) {
        return Err("the wasm-bindgen glue changed shape: update `ready_entry` (crates/xtask/src/package.rs)".into());
    }
    let glue = SNIPPETS
        .iter()
        .fold(glue.to_string(), |glue, (from, to)| glue.replace(from, to))
        .replace(
            FETCH,
            "throw new Error('lull-web: the wasm is embedded; import \"lull-web/manual\" to load it yourself');",
        )
        .replace("@ts-self-types=\"./lull_web.d.ts\"", "@ts-self-types=\"./web/lull_web.d.ts\"");
    let encoded = base64::engine::general_purpose::STANDARD.encode(wasm);
    Ok(format!(
        "{TEXT_CODEC}{glue}\n// Ready on import: the engine's wasm, embedded, instantiated synchronously.\n\
         initSync({{ module: Uint8Array.from(atob('{encoded}'), (c) => c.charCodeAt(0)) }});\n"
    ))
}

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
    let read = |name: &str| std::fs::read(out.join(name)).map_err(|e| format!("{name}: {e}"));
    let glue = String::from_utf8(read("web/lull_web.js")?).map_err(|e| format!("web/lull_web.js: {e}"))?;
    let entry = ready_entry(&glue, &read("web/lull_web_bg.wasm")?)?;
    std::fs::write(out.join("index.js"), entry).map_err(|e| format!("index.js: {e}"))?;
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
