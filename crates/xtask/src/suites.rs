//! The `test` suite list: every suite, in order, and running them with a summary.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::time::Instant;

use crate::cmd::{cargo, run};
use crate::setup::Tools;

/// lull-web's browser tests: Rust, compiled to wasm by wasm-bindgen-test,
/// driving the package's JS in headless Chromium (real DOM, real timers);
/// `webdriver.json` in the crate holds Chromium's offline flags.
fn browser_tests(root: &Path) -> Command {
    let mut cmd = Command::new("wasm-pack");
    cmd.args(["test", "--headless", "--chrome", "--chromedriver", "/usr/bin/chromedriver"]);
    cmd.arg(root.join("crates/lull-web"));
    cmd
}

/// A framework adapter's suite (`tests/web/<name>`, `name` being `react` or
/// `vue`): the built package installed there; Vitest over it (jsdom, fake
/// timers, `lockstep` with the framework's usual peer, server rendering);
/// then its `useSearch` page built by Vite and typed into in Chromium.
fn adapter(
    root: &Path,
    tools: &Tools,
    package: &Path,
    name: &str,
    lockstep: &str,
    peers: &[(&str, &str)],
) -> Result<(), String> {
    let dir = root.join("tests/web").join(name);
    crate::package::install(package, &dir)?;
    // The default config (the newest peer), then each `(config, peer)` in `peers`.
    for (config, peer) in [("vitest.config.mjs", "")].iter().chain(peers) {
        let mut vitest = Command::new(&tools.node22);
        vitest.arg(root.join("tests/web/node_modules/vitest/vitest.mjs")).args(["run", "--root"]).arg(&dir);
        vitest.args(["--config", config]);
        run(&format!("lull-web/{name} (Vitest: {lockstep}, server rendering{peer})"), root, &mut vitest)?;
    }
    let mut page = Command::new(&tools.node22);
    page.arg(dir.join("page.mjs")).arg(root.join("target"));
    run(&format!("lull-web/{name} (useSearch in a Vite page, Chromium)"), root, &mut page)
}

/// A suite: a short id (for `cargo xtask test <id>`), a name, and what runs it.
struct Suite<'a> {
    id: &'static str,
    name: &'static str,
    run: Box<dyn FnOnce() -> Result<(), String> + 'a>,
}

fn command<'a>(id: &'static str, name: &'static str, root: &'a Path, mut cmd: Command) -> Suite<'a> {
    Suite { id, name, run: Box::new(move || run(name, root, &mut cmd)) }
}

/// A suite of several commands, run in order until one fails.
fn commands<'a>(id: &'static str, name: &'static str, root: &'a Path, cmds: Vec<Command>) -> Suite<'a> {
    let run_all = move || cmds.into_iter().try_for_each(|mut cmd| run(name, root, &mut cmd));
    Suite { id, name, run: Box::new(run_all) }
}

/// Every suite, in the order `cargo xtask test` runs them.
fn suites<'a>(root: &'a Path, tools: &'a Tools) -> Vec<Suite<'a>> {
    // `--show-output`: passing tests' reports (the differential's counts) are printed.
    // lull-edge's tests run with its demo (its places index and routes), and
    // its unit tests once more without (the routes a production worker lacks).
    let mut tests = cargo(&["test", "--workspace", "--all-targets", "--features", "lull-edge/demo"]);
    tests.args(["--", "--show-output"]).env("LULL_NODE", &tools.node);
    let edge_without_demo = cargo(&["test", "-p", "lull-edge", "--lib"]);
    let mut doc_tests = cargo(&["test", "--workspace", "--doc"]);
    doc_tests.env("LULL_NODE", &tools.node);
    let wasm_lints = |package: &str, all_targets: bool, features: &[&str]| {
        let mut args = vec!["clippy", "-p", package, "--target", "wasm32-unknown-unknown"];
        if all_targets {
            args.push("--all-targets");
        }
        args.extend(features);
        args.extend(["--", "-D", "warnings"]);
        cargo(&args)
    };
    let tarball = Rc::new(OnceCell::new());
    let packed = tarball.clone();
    let for_fake_timers = tarball.clone();
    let for_commonjs = tarball.clone();
    let for_react = tarball.clone();
    let for_vue = tarball.clone();
    let for_browser = tarball.clone();
    let for_edge = tarball.clone();
    let for_demo = tarball.clone();
    // The package built by the `package` suite, or built now (once) when it did not run.
    let built = |tarball: &OnceCell<PathBuf>| match tarball.get() {
        Some(t) => Ok(t.clone()),
        None => crate::package::web(root).inspect(|t| drop(tarball.set(t.clone()))),
    };
    vec![
        command("format", "format", root, cargo(&["fmt", "--all", "--check"])),
        commands(
            "lints",
            "lints (native; lull-edge with and without its demo)",
            root,
            vec![
                cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]),
                cargo(&["clippy", "-p", "lull-edge", "--all-targets", "--features", "demo", "--", "-D", "warnings"]),
            ],
        ),
        command("lints-core-wasm", "lints (wasm32, lull-core)", root, wasm_lints("lull-core", false, &[])),
        command("lints-web-wasm", "lints (wasm32, lull-web)", root, wasm_lints("lull-web", true, &[])),
        commands(
            "lints-edge-wasm",
            "lints (wasm32, lull-edge, with and without its demo)",
            root,
            vec![wasm_lints("lull-edge", true, &[]), wasm_lints("lull-edge", true, &["--features", "demo"])],
        ),
        Suite {
            id: "lints-engines",
            name: "lints (wasm32, lull-web's two engines as shipped)",
            run: Box::new(move || {
                for engine in &crate::package::ENGINES {
                    let mut lints = cargo(&["clippy", "-p", "lull-web", "--target", "wasm32-unknown-unknown"]);
                    lints.args(["--profile", engine.profile, "--features", engine.features, "--", "-D", "warnings"]);
                    run("lints (engine)", root, &mut lints)?;
                }
                Ok(())
            }),
        },
        command(
            "build-core-wasm",
            "build (wasm32, lull-core)",
            root,
            cargo(&["build", "-p", "lull-core", "--target", "wasm32-unknown-unknown"]),
        ),
        commands(
            "unit",
            "tests (unit, scenarios, properties, faults, lodash differential)",
            root,
            vec![tests, edge_without_demo],
        ),
        command("doc", "doc tests", root, doc_tests),
        Suite {
            id: "package",
            name: "npm package (two engines, wasm-opt, npm pack)",
            run: Box::new(move || crate::package::web(root).map(|t| drop(packed.set(t)))),
        },
        Suite {
            id: "browser",
            name: "browser tests (the package in headless Chromium)",
            run: Box::new(move || {
                let package = built(&for_browser)?.with_file_name("lull-web");
                crate::package::for_browser_tests(root, &package)?;
                run("browser tests", root, &mut browser_tests(root))
            }),
        },
        Suite {
            id: "consumer",
            name: "consumer test (tarball in a fresh Vite app, in Chromium)",
            run: Box::new(move || {
                let mut cmd = Command::new(&tools.node);
                cmd.arg(root.join("tests/web/consumer.mjs")).arg(built(&tarball)?).arg(root.join("target"));
                run("consumer test", root, &mut cmd)
            }),
        },
        Suite {
            id: "fake-timers",
            name: "fake timers (Vitest and Jest, jsdom: lull-web in lockstep with lodash)",
            run: Box::new(move || {
                let package = built(&for_fake_timers)?.with_file_name("lull-web");
                let dir = root.join("tests/web/fake-timers");
                let modules = root.join("tests/web/node_modules");
                // Node 22: jsdom's fetch (undici) needs it.
                let mut vitest = Command::new(&tools.node22);
                vitest.arg(modules.join("vitest/vitest.mjs")).args(["run", "--root"]).arg(&dir);
                vitest.env("LULL_WEB_PKG", &package);
                run("fake timers (Vitest)", root, &mut vitest)?;
                // Jest runs the package's ES modules as they are (Node's VM modules),
                // from its folder: it finds jest.config.mjs there.
                let mut jest = Command::new(&tools.node22);
                jest.arg("--experimental-vm-modules").arg(modules.join("jest/bin/jest.js"));
                jest.env("LULL_WEB_PKG", &package);
                run("fake timers (Jest)", &dir, &mut jest)
            }),
        },
        Suite {
            id: "react",
            name: "lull-web/react (Vitest, jsdom, use-debounce, React 19 and 18; Chromium)",
            run: Box::new(move || {
                let package = built(&for_react)?.with_file_name("lull-web");
                let react18 = [("vitest.react18.config.mjs", "; on React 18")];
                adapter(root, tools, &package, "react", "lockstep with use-debounce", &react18)
            }),
        },
        Suite {
            id: "vue",
            name: "lull-web/vue (Vitest, jsdom, @vueuse/core; Chromium)",
            run: Box::new(move || {
                let package = built(&for_vue)?.with_file_name("lull-web");
                adapter(root, tools, &package, "vue", "lockstep with @vueuse/core", &[])
            }),
        },
        Suite {
            id: "commonjs",
            name: "CommonJS (require() on Node 20 and 22; Jest's CommonJS mode)",
            run: Box::new(move || {
                let package = built(&for_commonjs)?.with_file_name("lull-web");
                let dir = root.join("tests/web/commonjs");
                crate::package::install(&package, &dir)?;
                // Without require(esm) (Node >= 20.19 has it): the `require` condition must be CommonJS itself.
                for (node, major) in [(&tools.node20, 20), (&tools.node22, 22)] {
                    let mut require = Command::new(node);
                    require.arg("--no-experimental-require-module");
                    let name = format!("require() of every entry (Node {major})");
                    crate::node_tests::run_tests(&name, root, &dir, require, &["require.test.cjs"])?;
                }
                // Jest with its defaults (babel-jest, CommonJS), from the folder with its config.
                let mut jest = Command::new(&tools.node22);
                jest.arg(root.join("tests/web/node_modules/jest/bin/jest.js"));
                run("Jest, CommonJS mode", &dir, &mut jest)
            }),
        },
        Suite {
            id: "edge",
            name: "edge tests (workerd, real HTTP, restarts; fixtures at 3 ages)",
            // wrangler dev (one of these tests) serves the demo page's assets too;
            // production.test.mjs compares the production worker with the demo one.
            run: Box::new(move || {
                let package = built(&for_edge)?.with_file_name("lull-web");
                crate::edge::build(root, crate::edge::Worker::Production, crate::edge::PRODUCTION_BUILD)?;
                // cli.test.mjs runs the lull command against the worker.
                let lull = crate::edge::lull_cli(root)?.display().to_string();
                let env = [(crate::edge::LULL_BIN, lull.as_str())];
                crate::edge::tests(root, tools, &package, "tests/edge/*.test.mjs", "edge tests (workerd)", &env)?;
                crate::edge::fixture_tests_at_every_age(root, tools)
            }),
        },
        Suite {
            id: "demo",
            name: "demo page (wrangler dev, playwright in Chromium)",
            run: Box::new(move || {
                let package = built(&for_demo)?.with_file_name("lull-web");
                crate::edge::tests(
                    root,
                    tools,
                    &package,
                    "tests/browser/*.test.mjs",
                    "demo tests (wrangler dev, Chromium)",
                    &[],
                )
            }),
        },
    ]
}

/// The suite ids, in order, as [`suites`] lists them (for `test SUITE`,
/// `--repeat` and the usage message). Listing the suites runs nothing: the
/// paths are placeholders.
pub fn suite_ids() -> Vec<&'static str> {
    let tools = Tools { node: PathBuf::new(), node22: PathBuf::new(), node20: PathBuf::new() };
    suites(Path::new(""), &tools).iter().map(|s| s.id).collect()
}

/// Every suite (or only the one called `only`), each run even when an earlier one failed; then a summary.
pub fn test(root: &Path, tools: &Tools, only: Option<&str>) -> Result<(), String> {
    let mut chosen = suites(root, tools);
    if let Some(id) = only {
        chosen.retain(|s| s.id == id);
        if chosen.is_empty() {
            return Err(format!("no suite {id:?}; the suites are: {}", suite_ids().join(" ")));
        }
    }
    let mut results = Vec::new();
    for suite in chosen {
        let start = Instant::now();
        let outcome = (suite.run)();
        if let Err(e) = &outcome {
            eprintln!("xtask: {e}");
        }
        results.push((suite.name, outcome, start.elapsed().as_secs_f64()));
    }
    println!("\n{:<58} {:>6} {:>9}", "suite", "result", "seconds");
    for (name, outcome, secs) in &results {
        println!("{name:<58} {:>6} {secs:>9.1}", if outcome.is_ok() { "ok" } else { "FAILED" });
    }
    let failed = results.iter().filter(|(_, outcome, _)| outcome.is_err()).count();
    println!("summary: {} passed, {failed} failed", results.len() - failed);
    // Each failure again, last, where the tail of a long log shows it.
    for (name, outcome, _) in &results {
        if let Err(e) = outcome {
            println!("FAILED {name}: {e}");
        }
    }
    if failed == 0 { Ok(()) } else { Err(format!("{failed} suite(s) failed")) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn suite_ids_come_from_the_suite_list_each_once() {
        let ids = super::suite_ids();
        assert_eq!((ids.first(), ids.last()), (Some(&"format"), Some(&"demo")));
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "a suite id is listed twice: {ids:?}");
    }
}
