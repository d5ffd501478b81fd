//! E2B's template tags (`sandboxd_core::e2b::tags`) on the builds asked for through
//! E2B's API: whoever may build in the project puts and takes tags, whoever may read it
//! lists them.

use sandboxd_core::e2b::tags::{AssignedTags, TagAnswer, name_and_tag, tags_of};
use sandboxd_core::model::Principal;

use super::Builds;
use crate::ServiceError;

impl Builds {
    /// Puts `tags` on the build that `target` (`name:tag`) names in `project_id`.
    pub async fn e2b_assign_tags(
        &self,
        caller: &Principal,
        project_id: &str,
        target: &str,
        tags: &[String],
    ) -> Result<AssignedTags, ServiceError> {
        let (name, tag) = name_and_tag(target)?;
        let tags = tags_of(name, tags)?;
        self.service
            .access()
            .check_create_in(caller, project_id)
            .await?;
        let store = self.service.store();
        let builds = store
            .e2b_builds_named(&caller.organization_id, project_id, name)
            .await?;
        let build = builds
            .iter()
            .find(|b| b.tags.iter().any(|t| t == tag))
            .ok_or(ServiceError::NotFound("template tag"))?;
        store
            .tag_e2b_build(&caller.organization_id, &build.build_id, &tags)
            .await?
            .ok_or(ServiceError::NotFound("template tag"))?;
        Ok(AssignedTags {
            build_id: build.build_id.clone(),
            tags,
        })
    }

    /// The build that `tag` names of template `name` in `project_id`, for a create.
    pub async fn e2b_tagged_build(
        &self,
        caller: &Principal,
        project_id: &str,
        name: &str,
        tag: &str,
    ) -> Result<String, ServiceError> {
        self.visible(caller, project_id, "template").await?;
        self.service
            .store()
            .e2b_builds_named(&caller.organization_id, project_id, name)
            .await?
            .into_iter()
            .find(|b| b.name == name && b.tags.iter().any(|t| t == tag))
            .map(|b| b.build_id)
            .ok_or(ServiceError::NotFound("template tag"))
    }

    /// Takes `tags` off the builds of template `name` in `project_id`.
    pub async fn e2b_remove_tags(
        &self,
        caller: &Principal,
        project_id: &str,
        name: &str,
        tags: &[String],
    ) -> Result<(), ServiceError> {
        let tags = tags_of(name, tags)?;
        self.service
            .access()
            .check_create_in(caller, project_id)
            .await?;
        let store = self.service.store();
        if store
            .e2b_builds_named(&caller.organization_id, project_id, name)
            .await?
            .is_empty()
        {
            return Err(ServiceError::NotFound("template"));
        }
        store
            .untag_e2b_builds(&caller.organization_id, project_id, name, &tags)
            .await?;
        Ok(())
    }

    /// The tags of template `template` (its name or id) in `project_id`, newest build
    /// first.
    pub async fn e2b_tags(
        &self,
        caller: &Principal,
        project_id: &str,
        template: &str,
    ) -> Result<Vec<TagAnswer>, ServiceError> {
        self.visible(caller, project_id, "template").await?;
        let builds = self
            .service
            .store()
            .e2b_builds_named(&caller.organization_id, project_id, template)
            .await?;
        if builds.is_empty() {
            return Err(ServiceError::NotFound("template"));
        }
        Ok(builds
            .iter()
            .flat_map(|build| {
                build.tags.iter().map(|tag| TagAnswer {
                    tag: tag.clone(),
                    build_id: build.build_id.clone(),
                    created_at: sandboxd_core::rfc3339::format_millis(build.created_at),
                })
            })
            .collect())
    }
}
