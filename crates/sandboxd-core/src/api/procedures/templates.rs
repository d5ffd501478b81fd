//! `template.*`: templates users build from a Dockerfile.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Build a template from a Dockerfile and files: each step runs in a hardened
    /// container like a sandbox's (RUN with no network unless `networkMode: "internet"`),
    /// unchanged steps come from the build cache. Answers at once (202) with the build's
    /// id; `template.buildLog` follows it. A build of an existing name makes its next version;
    /// `sandbox.create {template: name}` uses the newest ready one. An organization runs
    /// a bounded number of builds at once (429 past it).
    TemplateBuild {
        name: "template.build", method: Post, names: Nothing, forwarded: false,
        tag: "template", errors: [400, 401, 403, 404, 429],
        tool "template-build" "Build a template from a Dockerfile (FROM a template such as base or python, RUN, COPY, ENV, WORKDIR, USER, CMD...), files as {path: base64}. Answers a buildId at once; follow it with template-buildLog, then sandbox-create {template: name}.",
        request: body(BuildTemplateRequest),
        response: accepted(BuildStarted),
    }

    /// A build's status and its log from `offset` on (at most 1,000 lines); ask again
    /// from `nextOffset` until the status is `ready` or `error`. A failed build names
    /// its step and its last lines.
    TemplateBuildLog {
        name: "template.buildLog", method: Get, names: Nothing, forwarded: false,
        tag: "template", errors: [400, 401, 404],
        tool "template-buildLog" "A template build's status (building, ready, error) and log lines from offset on; ask again from nextOffset while it is building.",
        request: query(BuildLogQuery),
        response: one(BuildLogView),
    }

    /// The templates built in projects the caller sees, each with its versions.
    TemplateAll {
        name: "template.all", method: Get, names: Nothing, forwarded: false,
        tag: "template", errors: [401, 403],
        tool "template-all" "The templates built in your projects, with their versions and statuses.",
        request: none,
        response: list(BuiltTemplateView),
    }

    /// One built template, by `templateId` or by `name` (in `projectId`).
    TemplateOne {
        name: "template.one", method: Get, names: Nothing, forwarded: false,
        tag: "template", errors: [400, 401, 404],
        tool "template-one" "One built template, by templateId or name, with its versions.",
        request: query(TemplateQuery),
        response: one(BuiltTemplateView),
    }

    /// Remove a built template, every version and its images. Refused (409) while a
    /// sandbox being created, running or paused uses it, or a build of it runs.
    TemplateRemove {
        name: "template.remove", method: Post, names: Nothing, forwarded: false,
        tag: "template", errors: [400, 401, 403, 404, 409],
        tool "template-remove" "Remove a built template and every version. Refused while a running or paused sandbox uses it.",
        request: body(TemplateIdBody),
        response: plain(bool),
    }
}
