//! The wire format of the REST API: request and response bodies, camelCase as in the
//! reference API. Validation of requests lives in [`crate::validate`].

mod contexts;
mod processes;
mod requests;
mod responses;
pub mod stream;

pub use contexts::*;
pub use processes::*;
pub use requests::*;
pub use responses::*;
