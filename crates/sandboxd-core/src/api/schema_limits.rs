//! The bounds the OpenAPI document states (literals in `#[schema]` attributes, which
//! take no constants) are the ones validation enforces.

use serde_json::Value;

use super::*;
use crate::limits::*;
use crate::validate::{MAX_KEY_TTL_MS, MIN_KEY_TTL_MS};

fn schema<T: utoipa::PartialSchema>() -> Value {
    serde_json::to_value(T::schema()).expect("schema serializes")
}

/// The schema of property `name`, wherever utoipa put it (`allOf` parts included).
fn property(schema: &Value, name: &str) -> Value {
    if let Some(found) = schema.pointer(&format!("/properties/{name}")) {
        return found.clone();
    }
    schema["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|part| property(part, name))
        .find(|found| !found.is_null())
        .unwrap_or(Value::Null)
}

fn bounds(schema: &Value, name: &str, key_min: &str, key_max: &str) -> (f64, f64) {
    let field = property(schema, name);
    let number = |key: &str| {
        field[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} has no {key}: {field}"))
    };
    (number(key_min), number(key_max))
}

fn range(schema: &Value, name: &str) -> (f64, f64) {
    bounds(schema, name, "minimum", "maximum")
}

fn length(schema: &Value, name: &str) -> (f64, f64) {
    bounds(schema, name, "minLength", "maxLength")
}

#[allow(clippy::cast_precision_loss)]
fn f(value: impl Into<i128>) -> f64 {
    value.into() as f64
}

#[test]
fn the_documented_bounds_are_the_enforced_ones() {
    let create = schema::<CreateSandboxRequest>();
    assert_eq!(range(&create, "cpu"), (MIN_CPU, MAX_CPU));
    assert_eq!(
        range(&create, "memoryMb"),
        (f(MIN_MEMORY_MB), f(MAX_MEMORY_MB))
    );
    assert_eq!(
        range(&create, "pidsLimit"),
        (f(MIN_PIDS_LIMIT), f(MAX_PIDS_LIMIT))
    );
    assert_eq!(
        range(&create, "timeoutMs"),
        (f(MIN_TIMEOUT_MS), f(MAX_TIMEOUT_MS))
    );
    assert_eq!(
        range(&create, "pausedTimeoutMs"),
        (f(MIN_PAUSED_TIMEOUT_MS), f(MAX_PAUSED_TIMEOUT_MS))
    );
    let set_timeout = schema::<SetTimeoutRequest>();
    assert_eq!(
        range(&set_timeout, "timeoutMs"),
        (f(MIN_TIMEOUT_MS), f(MAX_TIMEOUT_MS))
    );
    let exec_timeout = (f(MIN_EXEC_TIMEOUT_MS), f(MAX_EXEC_TIMEOUT_MS));
    assert_eq!(range(&schema::<ExecRequest>(), "timeoutMs"), exec_timeout);
    assert_eq!(
        range(&schema::<ContextRunRequest>(), "timeoutMs"),
        exec_timeout
    );
    assert_eq!(
        range(&schema::<WriteFileRequest>(), "mode"),
        (0.0, f(MAX_FILE_MODE))
    );
    assert_eq!(
        range(&schema::<CreateApiKeyRequest>(), "expiresInMs"),
        (f(MIN_KEY_TTL_MS), f(MAX_KEY_TTL_MS))
    );
    let expose = schema::<ExposePortRequest>();
    assert_eq!(range(&expose, "port"), (1.0, 65535.0));
    assert_eq!(
        range(&expose, "ttlSeconds"),
        (f(MIN_EXPOSE_TTL_SECONDS), f(MAX_EXPOSE_TTL_SECONDS))
    );
    assert_eq!(range(&schema::<PortRequest>(), "port"), (1.0, 65535.0));

    let name = (1.0, f(MAX_NAME_CHARS as u64));
    assert_eq!(length(&create, "name"), name);
    assert_eq!(length(&schema::<CreateProjectRequest>(), "name"), name);
    assert_eq!(length(&schema::<CreateEnvironmentRequest>(), "name"), name);
    assert_eq!(length(&schema::<CreateOrganizationRequest>(), "name"), name);
    assert_eq!(length(&schema::<CreateMemberRequest>(), "name"), name);
    assert_eq!(length(&schema::<CreateApiKeyRequest>(), "name"), name);

    let path = (1.0, f(MAX_PATH_CHARS as u64));
    assert_eq!(length(&create, "workdir"), path);
    assert_eq!(length(&schema::<ExecRequest>(), "cwd"), path);
    assert_eq!(length(&schema::<WriteFileRequest>(), "path"), path);
    assert_eq!(length(&schema::<ReadFileQuery>(), "path"), path);
    assert_eq!(length(&schema::<ListFilesQuery>(), "path"), path);
}
