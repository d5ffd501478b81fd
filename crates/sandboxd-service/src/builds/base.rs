//! What a build's `FROM` names, resolved to an image the engine holds: a configured
//! template, a ready template built in the same project, a snapshot of the organization
//! (by id), or an image the operator allows (`[builds] base_images`; by default the
//! configured templates' images). The engine is asked whether it holds the image: a
//! build never pulls.

use sandboxd_core::error::Invalid;
use sandboxd_core::model::{Isolation, Principal};
use sandboxd_core::snapshots::LABEL_SNAPSHOT;
use sandboxd_core::template_build::LABEL_BUILT_BY;
use sandboxd_core::template_build::Recipe;
use sandboxd_core::templates::TEMPLATE_NAMES;

use crate::{Service, ServiceError};

/// The base a build starts from.
#[derive(Debug, Clone)]
pub(super) struct Base {
    /// The image, as the engine names it.
    pub image: String,
    /// The user the template's sandboxes run as when its Dockerfile names none: the
    /// configured or built template's (`None`: the image's).
    pub user: Option<String>,
    /// The isolation the base's sandboxes run under at least (a template's, or the
    /// source sandbox's of a snapshot): the build and its sandboxes run so too.
    pub isolation: Option<Isolation>,
    /// `FROM` named an image (not a template or a snapshot).
    by_image: bool,
}

/// Whether a reference names an image by its id (`sha256:…`, or hex alone): the engine
/// finds any image by a prefix of its id, another organization's too.
fn names_an_id(reference: &str) -> bool {
    reference.starts_with("sha256:")
        || (reference.len() >= 6 && reference.chars().all(|c| c.is_ascii_hexdigit()))
}

fn refused(recipe: &Recipe, message: impl std::fmt::Display) -> ServiceError {
    Invalid::one(
        "dockerfile",
        format!("line {}: FROM {}: {message}", recipe.from_line, recipe.from),
    )
    .into()
}

pub(super) async fn resolve(
    service: &Service,
    caller: &Principal,
    project_id: &str,
    recipe: &Recipe,
) -> Result<Base, ServiceError> {
    let from = recipe.from.as_str();
    let base = if let Some(template) = service.templates().get(from) {
        Base {
            image: template.image.clone(),
            user: template.user.clone(),
            isolation: template.isolation,
            by_image: false,
        }
    } else if let Some(built) = service
        .store()
        .ready_template(&caller.organization_id, project_id, from)
        .await?
    {
        Base {
            image: built.image.unwrap_or_default(),
            user: built.user,
            isolation: built.isolation.as_deref().and_then(Isolation::parse),
            by_image: false,
        }
    } else if let Some(snapshot) = service
        .store()
        .snapshot(&caller.organization_id, from)
        .await?
        .filter(|s| s.project_id == project_id && s.server_id.is_none())
    {
        let source = service.store().sandbox(&snapshot.sandbox_id).await?;
        Base {
            image: snapshot.image,
            user: snapshot.user,
            isolation: source
                .and_then(|source| sandboxd_core::plan::isolation_of(source.runtime.as_deref())),
            by_image: false,
        }
    } else {
        let patterns = &service.inner.options.builds.base_images;
        // Snapshots, built templates and build steps are reached by their own names
        // only, with their access checked: never as images, whatever the patterns say.
        let allowed = if sandboxd_core::snapshots::names_snapshot_image(from) || names_an_id(from) {
            false
        } else if patterns.is_empty() {
            let wanted = sandboxd_core::images::normalize(from);
            TEMPLATE_NAMES.iter().any(|name| {
                service
                    .templates()
                    .get(name)
                    .is_some_and(|t| sandboxd_core::images::normalize(&t.image) == wanted)
            })
        } else {
            sandboxd_core::images::allowed(patterns, from)
        };
        if !allowed {
            return Err(refused(
                recipe,
                "is not a template, a snapshot of the project or an image the server allows builds on ([builds] base_images)",
            ));
        }
        Base {
            image: from.to_owned(),
            user: None,
            isolation: None,
            by_image: true,
        }
    };
    let Some(facts) = service.engine().image_facts(&base.image).await? else {
        return Err(refused(
            recipe,
            "the engine does not hold this image, and a build never pulls one",
        ));
    };
    // An image named by the operator's patterns is never one of sandboxd's own (a
    // snapshot or a built template of any organization, under another name).
    let own = |label: &str| {
        facts
            .settings
            .labels
            .get(label)
            .is_some_and(|v| !v.is_empty())
    };
    if base.by_image && (own(LABEL_SNAPSHOT) || own(LABEL_BUILT_BY)) {
        return Err(refused(
            recipe,
            "is sandboxd's own image: name the template or the snapshot instead",
        ));
    }
    Ok(base)
}
