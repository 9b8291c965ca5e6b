//! The `lull` command (being built).
fn main() {}
