//! Nothing but features: see `Cargo.toml`. The binary depends on this crate so that its
//! build and the test build share every dependency.
