//! `lull`: lull-edge from the command line. Send events (one, or an NDJSON
//! batch), read a key's or a queue topic's status, list, replay and discard
//! dead letters, mint client tokens, and pull a queue topic's windows
//! (`lull pull`). Built on `lull-client`; exit codes in [`exit`].

pub mod admin;
pub mod cli;
pub mod config;
pub mod duration;
pub mod exit;
pub mod failure;
pub mod output;
pub mod pull;
pub mod pull_args;
pub mod send;

use crate::cli::{Cli, Command};
use crate::failure::Failure;
use crate::output::Output;

/// Run the command `cli` describes.
pub async fn run(cli: Cli) -> Result<(), Failure> {
    let out = Output { compact: cli.compact };
    match cli.command {
        Command::Pull(flags) => pull::run(pull_args::PullArgs::from_flags(flags)?).await,
        Command::Send(args) => send::run(&config::client(&cli.api)?, args, out).await,
        Command::Status(args) => admin::status(&config::client(&cli.api)?, args, out).await,
        Command::DeadLetters(args) => admin::dead_letters(&config::client(&cli.api)?, args, out).await,
        Command::Token(args) => admin::token(&config::client(&cli.api)?, args, out).await,
    }
}

/// Parse the command line, run it, and exit with its code ([`exit`]); errors on stderr.
pub fn main() -> ! {
    let cli = <Cli as clap::Parser>::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lull: cannot start: {e}");
            std::process::exit(exit::UNAVAILABLE);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => std::process::exit(exit::OK),
        Err(failure) => {
            eprintln!("lull: {}", failure.message);
            std::process::exit(failure.code);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn pull_parses_into_typed_args() {
        let cli = Cli::try_parse_from([
            "lull",
            "pull",
            "--budget",
            "55s",
            "--idle",
            "5s",
            "--estimate",
            "2s",
            "--tolerance",
            "2",
            "--batch",
            "20",
            "--handler-timeout",
            "500ms",
            "--json",
            "--account-id",
            "acc",
            "--api-token",
            "cf",
            "--queue",
            "q1",
            "--api-base-url",
            "http://127.0.0.1:9/cf",
            "--",
            "./handle",
            "--flag",
        ])
        .unwrap();
        let Command::Pull(flags) = cli.command else { panic!() };
        let args = pull_args::PullArgs::from_flags(flags).unwrap();
        assert_eq!((args.budget.as_secs(), args.idle.as_secs(), args.estimate.as_secs()), (55, 5, 2));
        assert_eq!((args.tolerance, args.batch, args.handler_timeout.as_millis(), args.json), (2.0, 20, 500, true));
        assert_eq!(args.command, ["./handle", "--flag"]);
        assert_eq!(args.queue.config().base, "http://127.0.0.1:9/cf");
        assert_eq!((args.queue.config().account_id.as_str(), args.queue.config().queue_id.as_str()), ("acc", "q1"));
    }

    #[test]
    fn pull_refuses_what_it_cannot_use() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["lull", "pull", "--account-id", "a", "--api-token", "t", "--queue", "q"];
            argv.extend(extra);
            Cli::try_parse_from(argv)
        };
        assert!(parse(&["--batch", "0", "--", "x"]).is_err());
        assert!(parse(&["--batch", "101", "--", "x"]).is_err());
        assert!(parse(&["--tolerance", "0", "--", "x"]).is_err());
        assert!(parse(&["--tolerance", "NaN", "--", "x"]).is_err());
        assert!(parse(&["--budget", "5", "--", "x"]).is_err());
        assert!(parse(&[]).is_err(), "a handler is required");
        let Command::Pull(flags) =
            Cli::try_parse_from(["lull", "pull", "--api-token", "t", "--queue", "q", "--", "x"]).unwrap().command
        else {
            panic!()
        };
        if std::env::var_os("CLOUDFLARE_ACCOUNT_ID").is_none() {
            let failure = pull_args::PullArgs::from_flags(flags).unwrap_err();
            assert_eq!(failure.message, "CLOUDFLARE_ACCOUNT_ID (or --account-id) is not set");
            assert_eq!(failure.code, exit::USAGE);
        }
    }

    #[test]
    fn send_takes_a_key_or_a_batch() {
        assert!(Cli::try_parse_from(["lull", "send", "docs", "k", "{}"]).is_ok());
        assert!(Cli::try_parse_from(["lull", "send", "docs", "--batch", "-"]).is_ok());
        assert!(Cli::try_parse_from(["lull", "send", "docs"]).is_err());
        assert!(Cli::try_parse_from(["lull", "send", "docs", "k", "--batch", "f"]).is_err());
        assert!(Cli::try_parse_from(["lull", "token", "docs"]).is_err(), "--key or --key-prefix");
        assert!(Cli::try_parse_from(["lull", "token", "docs", "--key", "a", "--key-prefix", "b"]).is_err());
    }
}
