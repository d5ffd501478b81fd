//! `project.*` and `environment.create`.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// The caller's projects with their environments.
    ProjectAll {
        name: "project.all", method: Get, names: Nothing, forwarded: false,
        tag: "project", errors: [401],
        tool "project-all" "Your projects with their environments. sandbox-create needs an environmentId from here.",
        request: none,
        response: list(ProjectView),
    }

    /// Create a project; it gets an environment `production`.
    ProjectCreate {
        name: "project.create", method: Post, names: Nothing, forwarded: false,
        tag: "project", errors: [400, 401],
        no_tool(super::ADMINISTRATION),
        request: body(CreateProjectRequest),
        response: one(ProjectView),
    }

    /// Create an environment in a project.
    EnvironmentCreate {
        name: "environment.create", method: Post, names: Nothing, forwarded: false,
        tag: "project", errors: [400, 401, 404, 409],
        no_tool(super::ADMINISTRATION),
        request: body(CreateEnvironmentRequest),
        response: one(EnvironmentView),
    }
}
