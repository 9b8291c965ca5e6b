//! `lull`: see the `lull_cli` library (`lull --help`).

fn main() {
    lull_cli::main()
}
