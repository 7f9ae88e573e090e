//! amberd binary.
fn main() {}
