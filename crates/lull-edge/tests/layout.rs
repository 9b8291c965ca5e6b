//! The maps of lull-edge stay true: every module at the top of `src/` (a
//! file or a folder) is named in the crate map of `src/lib.rs` and in the
//! repository README's layout, and neither names a module that is gone.

#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::path::Path;

/// The modules at the top of `src/`: `name` for `name.rs` and for a folder `name/`.
fn modules() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_string();
            if path.is_dir() { Some(name) } else { name.strip_suffix(".rs").map(str::to_string) }
        })
        .filter(|name| name != "lib")
        .collect();
    names.sort();
    names
}

#[test]
fn the_crate_map_names_every_module() {
    let lib = include_str!("../src/lib.rs");
    let map: String = lib.lines().filter(|line| line.starts_with("//!")).collect::<Vec<_>>().join("\n");
    for module in modules() {
        assert!(
            map.contains(&format!("[`{module}`]")) || map.contains(&format!("`{module}`")),
            "src/lib.rs's crate map does not name the module {module}"
        );
        let declared = [format!("mod {module};"), format!("pub mod {module};")];
        assert!(declared.iter().any(|d| lib.contains(d.as_str())), "src/lib.rs does not declare {module}");
    }
}

#[test]
fn the_readme_layout_names_every_module_and_no_other() {
    let readme = include_str!("../../../README.md");
    let layout = readme.split_once("## Layout").unwrap().1.split_once("## ").map_or("", |(layout, _)| layout);
    let modules = modules();
    for module in &modules {
        let file = format!("src/{module}.rs");
        let folder = format!("src/{module}/");
        assert!(layout.contains(&file) || layout.contains(&folder), "the README's layout does not name {module}");
    }
    for named in layout.split_whitespace().filter_map(|word| word.strip_prefix("src/")) {
        let name = named.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_');
        let name = name.split('/').next().unwrap().trim_end_matches(".rs");
        assert!(modules.iter().any(|m| m == name), "the README's layout names src/{named}, which is gone");
    }
}
