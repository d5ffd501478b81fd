//! A procedure's one definition: its row of the procedure table, its request and response
//! types, its documentation and its MCP tool's description. The server derives the REST
//! route, the OpenAPI operation and the MCP tool from it; the typed client calls by it.
//! [`define!`](crate::define) writes definitions; [`operation`] documents one.
//!
//! Each definition is a unit type implementing `Definition`: its row (path, method, where
//! a request names its sandbox, whether replicas forward it, its MCP tool or the reason
//! it has none), its request and response types, its OpenAPI tag, the error statuses it
//! documents, its doc lines and its tool's description. `operation::<D>()` makes its
//! OpenAPI operation. A definition is added to the list of `each_defined!` (in
//! `procedures/mod.rs`), which the server's routes, its MCP tools and `PROCEDURES` all
//! read.

use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, ResponseBuilder, Schema};

use super::row::{Method, Procedure};

/// Schemas a document's components hold, by name.
pub type Components = Vec<(String, RefOr<Schema>)>;

/// How a procedure takes its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// None: the request type is [`NoArguments`].
    Nothing,
    /// A JSON body.
    Body,
    /// The query string.
    Query,
}

/// The request of a procedure that takes no arguments (whatever a query string or an
/// MCP call holds is ignored).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, Serialize, schemars::JsonSchema,
)]
pub struct NoArguments {}

/// One procedure, defined once.
pub trait Definition: Send + Sync + 'static {
    /// Its row of the procedure table.
    const PROCEDURE: Procedure;
    /// Its OpenAPI tag.
    const TAG: &'static str;
    /// The error statuses it documents (each answers an `ErrorBody`).
    const ERRORS: &'static [u16];
    /// Its documentation, a line each: the first paragraph is the OpenAPI summary, the
    /// rest its description.
    const DOC: &'static [&'static str];
    /// What its MCP tool tells an agent (empty when it has no tool).
    const TOOL_DESCRIPTION: &'static str;
    /// How it takes its arguments.
    const TAKES: Takes;
    /// The status of its answer: 200, or 202 for one that answers before the work it
    /// starts is done.
    const SUCCESS: u16 = 200;
    type Request: DeserializeOwned + Send + 'static;
    type Response: Serialize + Send + 'static;
    /// The request's schema and the components it names (a body), or its parameters (a
    /// query).
    fn request_doc() -> RequestDoc;
    /// The answer's schema and the components it names.
    fn response_doc() -> (RefOr<Schema>, Components);
}

/// What documents a request.
pub enum RequestDoc {
    Nothing,
    Body(Box<RefOr<Schema>>, Components),
    Query(Vec<utoipa::openapi::path::Parameter>),
}

impl std::fmt::Debug for RequestDoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Nothing => "Nothing",
            Self::Body(..) => "Body",
            Self::Query(..) => "Query",
        })
    }
}

/// A named schema: a reference to it, with it and what it names as components.
pub fn by_reference<T: utoipa::ToSchema>() -> (RefOr<Schema>, Components) {
    let mut components = vec![(T::name().into_owned(), T::schema())];
    T::schemas(&mut components);
    (Ref::from_schema_name(T::name()).into(), components)
}

/// A list of a named schema.
pub fn list_by_reference<T: utoipa::ToSchema>() -> (RefOr<Schema>, Components) {
    let (item, components) = by_reference::<T>();
    (
        utoipa::openapi::schema::ArrayBuilder::new()
            .items(item)
            .build()
            .into(),
        components,
    )
}

/// A schema written in place (`bool`).
pub fn in_place<T: utoipa::PartialSchema>() -> (RefOr<Schema>, Components) {
    (T::schema(), Vec::new())
}

/// The OpenAPI operation of `D`, with its method and the components it names.
pub fn operation<D: Definition>() -> (HttpMethod, Operation, Components) {
    let p = D::PROCEDURE;
    let (summary, description) = summary_and_description(D::DOC);
    let mut components = Components::new();
    let mut operation = OperationBuilder::new()
        .operation_id(Some(p.name.replacen('.', "-", 1)))
        .tag(D::TAG)
        .summary(summary)
        .description(description)
        .security(SecurityRequirement::new("apiKey", Vec::<String>::new()));
    match D::request_doc() {
        RequestDoc::Nothing => {}
        RequestDoc::Body(schema, named) => {
            let schema = *schema;
            components.extend(named);
            operation = operation.request_body(Some(
                RequestBodyBuilder::new()
                    .content(
                        "application/json",
                        ContentBuilder::new().schema(Some(schema)).build(),
                    )
                    .required(Some(Required::True))
                    .build(),
            ));
        }
        RequestDoc::Query(parameters) => {
            operation = operation.parameters(Some(parameters));
        }
    }
    let (answer, named) = D::response_doc();
    components.extend(named);
    operation = operation.response(
        D::SUCCESS.to_string(),
        ResponseBuilder::new().content(
            "application/json",
            ContentBuilder::new().schema(Some(answer)).build(),
        ),
    );
    let (error, named) = by_reference::<super::ErrorBody>();
    components.extend(named);
    for status in D::ERRORS {
        operation = operation.response(
            status.to_string(),
            ResponseBuilder::new().content(
                "application/json",
                ContentBuilder::new().schema(Some(error.clone())).build(),
            ),
        );
    }
    let method = match p.method {
        Method::Get => HttpMethod::Get,
        Method::Post => HttpMethod::Post,
    };
    (method, operation.build(), components)
}

/// A doc comment's first paragraph and the rest, as utoipa reads one: lines stripped of
/// their shared indent, paragraphs joined by a blank line.
fn summary_and_description(doc: &[&str]) -> (Option<String>, Option<String>) {
    let indent = doc
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = doc
        .iter()
        .map(|line| line.trim_end())
        .map(|line| line.get(indent..).unwrap_or(""))
        .collect();
    let mut paragraphs = lines
        .split(|line| line.trim().is_empty())
        .map(|paragraph| paragraph.join("\n"));
    let summary = paragraphs.next().filter(|s| !s.is_empty());
    let rest: Vec<String> = paragraphs.collect();
    let description = Some(rest.join("\n\n")).filter(|d| !d.is_empty());
    (summary, description)
}

/// Defines procedures: for each, a unit type implementing [`Definition`].
///
/// ```ignore
/// define! {
///     /// Remove a volume and everything in it.
///     VolumeRemove {
///         name: "volume.remove", method: Post, names: Nothing, forwarded: false,
///         tag: "volume", errors: [400, 401, 404, 409],
///         tool: "volume-remove" "Remove a volume…",     // or: no_tool(REASON)
///         request: body(VolumeIdBody),                 // or: query(T), none
///         response: plain(bool),                       // or: one(T), list(T)
///     }
/// }
/// ```
#[macro_export]
macro_rules! define {
    ($(
        $(#[doc = $doc:literal])*
        $ty:ident {
            name: $name:literal, method: $method:ident, names: $names:ident, forwarded: $forwarded:literal,
            tag: $tag:literal, errors: [$($error:literal),* $(,)?],
            $tool_kind:ident $tool:tt $($tool_description:literal)?,
            request: $takes:ident $(($request:ty))?,
            response: $shape:ident($response:ty) $(,)?
        }
    )*) => {$(
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;

        impl $crate::api::definition::Definition for $ty {
            const PROCEDURE: $crate::api::procedures::Procedure = $crate::api::procedures::Procedure {
                name: $name,
                path: concat!("/api/", $name),
                method: $crate::api::procedures::Method::$method,
                names: $crate::api::procedures::Names::$names,
                forwarded: $forwarded,
                tool: $crate::define!(@tool $tool_kind $tool),
            };
            const TAG: &'static str = $tag;
            const ERRORS: &'static [u16] = &[$($error),*];
            const DOC: &'static [&'static str] = &[$($doc),*];
            const TOOL_DESCRIPTION: &'static str = $crate::define!(@first $($tool_description)? "");
            const TAKES: $crate::api::definition::Takes = $crate::define!(@takes $takes);
            const SUCCESS: u16 = $crate::define!(@success $shape);
            type Request = $crate::define!(@request $takes $($request)?);
            type Response = $crate::define!(@response $shape $response);
            fn request_doc() -> $crate::api::definition::RequestDoc {
                $crate::define!(@request_doc $takes $($request)?)
            }
            fn response_doc() -> (
                utoipa::openapi::RefOr<utoipa::openapi::Schema>,
                $crate::api::definition::Components,
            ) {
                $crate::define!(@response_doc $shape $response)
            }
        }
    )*};
    (@tool tool $name:literal) => { $crate::api::procedures::Tool::Named($name) };
    (@tool no_tool ($reason:expr)) => { $crate::api::procedures::Tool::Without($reason) };
    (@first $first:literal $($rest:literal)*) => { $first };
    (@takes none) => { $crate::api::definition::Takes::Nothing };
    (@takes body) => { $crate::api::definition::Takes::Body };
    (@takes query) => { $crate::api::definition::Takes::Query };
    (@request none) => { $crate::api::definition::NoArguments };
    (@request $takes:ident $request:ty) => { $request };
    (@success accepted) => { 202 };
    (@success $shape:ident) => { 200 };
    (@response list $response:ty) => { Vec<$response> };
    (@response $shape:ident $response:ty) => { $response };
    (@request_doc none) => { $crate::api::definition::RequestDoc::Nothing };
    (@request_doc body $request:ty) => {{
        let (schema, components) = $crate::api::definition::by_reference::<$request>();
        $crate::api::definition::RequestDoc::Body(Box::new(schema), components)
    }};
    (@request_doc query $request:ty) => {
        $crate::api::definition::RequestDoc::Query(
            <$request as utoipa::IntoParams>::into_params(|| None),
        )
    };
    (@response_doc one $response:ty) => { $crate::api::definition::by_reference::<$response>() };
    (@response_doc accepted $response:ty) => { $crate::api::definition::by_reference::<$response>() };
    (@response_doc list $response:ty) => { $crate::api::definition::list_by_reference::<$response>() };
    (@response_doc plain $response:ty) => { $crate::api::definition::in_place::<$response>() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doc_comment_splits_as_utoipa_splits_it() {
        assert_eq!(
            summary_and_description(&[" One line", " and the next.", "", " More."]),
            (
                Some("One line\nand the next.".to_owned()),
                Some("More.".to_owned())
            )
        );
        assert_eq!(summary_and_description(&[]), (None, None));
    }
}
