//! The repository's own automation: `cargo xtask verify | bench | fuzz`.

fn main() {}
