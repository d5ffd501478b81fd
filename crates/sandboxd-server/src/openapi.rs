//! The OpenAPI document, built from the same handlers and types that serve the API.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "sandboxd", description = "Ephemeral, hardened Docker sandboxes driven through an API."),
    modifiers(&ApiKeyScheme),
    tags((name = "sandbox", description = "Sandbox lifecycle, commands and files"),
         (name = "snapshot", description = "Snapshots of sandboxes' files, and sandboxes forked from them"),
         (name = "volume", description = "Named storage that outlives sandboxes, mounted into them"),
         (name = "process", description = "Background processes in a sandbox"),
         (name = "context", description = "Interpreter contexts whose state persists between runs"),
         (name = "project", description = "Projects and environments"),
         (name = "remote-server", description = "Remote servers sandboxes run on: a Docker engine reached over one SSH connection"),
         (name = "server", description = "The server itself"))
)]
pub struct ApiDoc;

struct ApiKeyScheme;

impl Modify for ApiKeyScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "apiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
        );
    }
}
