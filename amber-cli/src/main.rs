//! amber-cli binary.
fn main() {}
