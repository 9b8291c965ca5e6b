//! `lull pull`: the budgeted pull loop (not built yet).

use crate::failure::Failure;
use crate::pull_args::PullArgs;

/// Run `lull pull` with `args`.
pub async fn run(args: PullArgs) -> Result<(), Failure> {
    let _ = args;
    Err(Failure::usage("lull pull is not built yet"))
}
