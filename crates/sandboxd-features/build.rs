//! Nothing to build: the build dependencies are here for their features only.

fn main() {}
