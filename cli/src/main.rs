//! The `charter` binary: a thin clap front over the compiler and runtime.

fn main() {}
