//! What a build's `FROM` names, resolved to an image the engine holds: a configured
//! template, a ready template built in the same project, a snapshot of the organization
//! (by id), or an image the operator allows (`[builds] base_images`; by default the
//! configured templates' images). The engine is asked whether it holds the image: a
//! build never pulls.

use sandboxd_core::error::Invalid;
use sandboxd_core::model::Principal;
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
        }
    } else if let Some(built) = service
        .store()
        .ready_template(&caller.organization_id, project_id, from)
        .await?
    {
        Base {
            image: built.image.unwrap_or_default(),
            user: built.user,
        }
    } else if let Some(snapshot) = service
        .store()
        .snapshot(&caller.organization_id, from)
        .await?
        .filter(|s| s.project_id == project_id && s.server_id.is_none())
    {
        Base {
            image: snapshot.image,
            user: snapshot.user,
        }
    } else {
        let patterns = &service.inner.options.builds.base_images;
        let allowed = if patterns.is_empty() {
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
        }
    };
    if service.engine().image_facts(&base.image).await?.is_none() {
        return Err(refused(
            recipe,
            "the engine does not hold this image, and a build never pulls one",
        ));
    }
    Ok(base)
}
