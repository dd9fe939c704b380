//! The `garuda` binary (skeleton).
fn main() {}
