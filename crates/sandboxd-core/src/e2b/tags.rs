//! E2B's template tags: names for builds of a template (`name:tag`). A build asked for
//! as `name:tag` carries that tag; `POST /templates/tags` puts more tags on the build a
//! `name:tag` names (a tag names one build of a template: put on another, it leaves the
//! one it named), `DELETE /templates/tags` takes tags off, `GET /templates/{id}/tags`
//! lists them with the build each names.

use serde::{Deserialize, Serialize};

use crate::error::Invalid;

/// The tag of a build asked for without one.
pub const DEFAULT_TAG: &str = "default";
/// Tags one call names, at most.
pub const MAX_TAGS: usize = 16;

/// Body of `POST /templates/tags`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AssignTags {
    /// The build to tag: `name:tag` (`name` alone is its `default`).
    pub target: String,
    pub tags: Vec<String>,
}

/// Body of `DELETE /templates/tags`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RemoveTags {
    pub name: String,
    pub tags: Vec<String>,
}

/// Answer of `POST /templates/tags` (201): the build tagged and the tags put on it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AssignedTags {
    #[serde(rename = "buildID")]
    pub build_id: String,
    pub tags: Vec<String>,
}

/// One tag of `GET /templates/{id}/tags`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TagAnswer {
    pub tag: String,
    #[serde(rename = "buildID")]
    pub build_id: String,
    pub created_at: String,
}

/// Whether `tag` is a tag: 1 to 64 characters, none of them `:`, a space or a control.
pub fn tag_ok(tag: &str) -> bool {
    !tag.is_empty()
        && tag.chars().count() <= 64
        && !tag
            .chars()
            .any(|c| c == ':' || c.is_whitespace() || c.is_control())
}

/// A template's name and tag in `name:tag` (its `default` when no tag is written).
pub fn name_and_tag(target: &str) -> Result<(&str, &str), Invalid> {
    let (name, tag) = target.split_once(':').unwrap_or((target, DEFAULT_TAG));
    if name.is_empty() || !tag_ok(tag) {
        return Err(Invalid::one(
            "target",
            format!(
                "{target:?} is not `name:tag` (both parts non-empty, the tag without `:` or spaces)"
            ),
        ));
    }
    Ok((name, tag))
}

/// The tags a call names, each as written or as `name:tag` of the template `name`;
/// none empty, at most [`MAX_TAGS`].
pub fn tags_of(name: &str, asked: &[String]) -> Result<Vec<String>, Invalid> {
    if asked.is_empty() || asked.len() > MAX_TAGS {
        return Err(Invalid::one("tags", format!("1 to {MAX_TAGS} tags")));
    }
    let mut tags = Vec::with_capacity(asked.len());
    for written in asked {
        let tag = match written.split_once(':') {
            Some((of, tag)) if of == name => tag,
            Some(_) => {
                return Err(Invalid::one(
                    "tags",
                    format!("{written:?}: a tag is `tag` or `{name}:tag`"),
                ));
            }
            None => written.as_str(),
        };
        if !tag_ok(tag) {
            return Err(Invalid::one(
                "tags",
                format!("{written:?}: 1 to 64 characters, without `:`, spaces or controls"),
            ));
        }
        if !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_owned());
        }
    }
    Ok(tags)
}

/// The tags of builds after `tags` are put on `build`: `(build id, its tags)` for each
/// build whose tags change (the tagged one last).
pub fn moved(
    builds: &[(String, Vec<String>)],
    build: &str,
    tags: &[String],
) -> Vec<(String, Vec<String>)> {
    let mut changed = Vec::new();
    for (id, held) in builds.iter().filter(|(id, _)| id != build) {
        let kept: Vec<String> = held.iter().filter(|t| !tags.contains(t)).cloned().collect();
        if kept.len() != held.len() {
            changed.push((id.clone(), kept));
        }
    }
    if let Some((_, held)) = builds.iter().find(|(id, _)| id == build) {
        let mut all = held.clone();
        all.extend(tags.iter().filter(|t| !held.contains(t)).cloned());
        changed.push((build.to_owned(), all));
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_name_and_tag_and_bad_ones_are_refused() {
        assert_eq!(name_and_tag("app:v1").unwrap(), ("app", "v1"));
        assert_eq!(name_and_tag("app").unwrap(), ("app", DEFAULT_TAG));
        for bad in [":v1", "app:", "", "app:a b"] {
            assert!(name_and_tag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tags_are_plain_or_of_the_templates_name() {
        let tags = tags_of("app", &["prod".into(), "app:latest".into(), "prod".into()]).unwrap();
        assert_eq!(tags, ["prod", "latest"]);
        for bad in [":invalid-tag", "app:", "other:x", "", "has space"] {
            assert!(tags_of("app", &[bad.into()]).is_err(), "{bad}");
        }
        assert!(tags_of("app", &[]).is_err());
        assert!(tags_of("app", &vec!["t".to_owned(); 17]).is_err());
    }

    #[test]
    fn a_tag_put_on_a_build_leaves_the_one_it_named() {
        let builds = [
            ("old".to_owned(), vec!["v1".to_owned(), "latest".to_owned()]),
            ("new".to_owned(), vec!["v2".to_owned()]),
            ("other".to_owned(), vec!["x".to_owned()]),
        ];
        let changed = moved(&builds, "new", &["latest".into(), "v2".into()]);
        assert_eq!(
            changed,
            [
                ("old".to_owned(), vec!["v1".to_owned()]),
                ("new".to_owned(), vec!["v2".to_owned(), "latest".to_owned()]),
            ]
        );
    }
}
