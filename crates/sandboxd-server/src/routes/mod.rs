//! HTTP routes, grouped by resource.

pub mod projects;
pub mod sandbox;
