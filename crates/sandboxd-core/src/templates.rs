//! The built-in templates. Their images can be overridden by configuration, so an operator
//! without registry access can point them at local images.

use std::collections::BTreeMap;

use crate::api::TemplateView;
use crate::limits::DEFAULT_WORKDIR;

/// Names of the built-in templates, in display order.
pub const TEMPLATE_NAMES: [&str; 4] = ["base", "python", "node", "code-interpreter-v1"];

/// The user every template runs as.
pub const TEMPLATE_USER: &str = "1000:1000";

/// What a template resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub image: String,
    pub user: Option<String>,
    pub workdir: String,
    pub description: String,
    /// The isolation of its sandboxes when their create asks for none; the server's
    /// when `None`.
    pub isolation: Option<crate::model::Isolation>,
}

/// The template table in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Templates(BTreeMap<String, Template>);

impl Default for Templates {
    fn default() -> Self {
        Self::with_images(&BTreeMap::new())
    }
}

impl Templates {
    /// The built-in templates with the images named in `overrides` (by template name).
    pub fn with_images(overrides: &BTreeMap<String, String>) -> Self {
        let builtin = [
            (
                "base",
                "ubuntu:24.04",
                "Ubuntu 24.04 with a POSIX shell and coreutils",
            ),
            ("python", "python:3.12-slim", "Python 3.12 (pip available)"),
            ("node", "node:22-slim", "Node.js 22 (npm available)"),
            (
                "code-interpreter-v1",
                "python:3.12-slim",
                "For code interpreter contexts (E2B's code interpreter names it): results in \
                 every format (pictures, charts, tables) when its image has IPython, \
                 matplotlib and pandas; JavaScript contexts when it has node",
            ),
        ];
        Self(
            builtin
                .into_iter()
                .map(|(name, image, description)| {
                    // A configured image is not the one the built-in text describes.
                    let (image, description) = match overrides.get(name) {
                        Some(configured) => (
                            configured.clone(),
                            format!("{configured}, set by the server's configuration"),
                        ),
                        None => (image.to_owned(), description.to_owned()),
                    };
                    let template = Template {
                        image,
                        user: Some(TEMPLATE_USER.into()),
                        workdir: DEFAULT_WORKDIR.into(),
                        description,
                        isolation: None,
                    };
                    (name.to_owned(), template)
                })
                .collect(),
        )
    }

    /// These templates with the isolation named in `isolation` (by template name).
    pub fn with_isolation(mut self, isolation: &BTreeMap<String, crate::model::Isolation>) -> Self {
        for (name, template) in &mut self.0 {
            template.isolation = isolation.get(name).copied();
        }
        self
    }

    pub fn get(&self, name: &str) -> Option<&Template> {
        self.0.get(name)
    }

    /// The templates as the API lists them, in display order.
    pub fn views(&self) -> Vec<TemplateView> {
        TEMPLATE_NAMES
            .iter()
            .filter_map(|name| {
                self.0.get(*name).map(|t| TemplateView {
                    name: (*name).to_owned(),
                    kind: "configured".into(),
                    project_id: None,
                    image: t.image.clone(),
                    user: t.user.clone(),
                    workdir: t.workdir.clone(),
                    description: t.description.clone(),
                    isolation: t.isolation,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_the_image_and_say_so() {
        let overrides = BTreeMap::from([("python".to_owned(), "local/python:1".to_owned())]);
        let templates = Templates::with_images(&overrides);
        let python = templates.get("python");
        assert_eq!(python.map(|t| t.image.as_str()), Some("local/python:1"));
        assert_eq!(python.and_then(|t| t.user.as_deref()), Some("1000:1000"));
        assert_eq!(
            python.map(|t| t.description.as_str()),
            Some("local/python:1, set by the server's configuration")
        );
        assert_eq!(
            templates.get("base").map(|t| t.image.as_str()),
            Some("ubuntu:24.04")
        );
        let names: Vec<_> = templates.views().into_iter().map(|v| v.name).collect();
        assert_eq!(names, ["base", "python", "node", "code-interpreter-v1"]);
        let gvisor = BTreeMap::from([("node".to_owned(), crate::model::Isolation::Gvisor)]);
        let templates = templates.with_isolation(&gvisor);
        assert_eq!(
            templates.get("node").and_then(|t| t.isolation),
            Some(crate::model::Isolation::Gvisor)
        );
        assert_eq!(templates.get("base").and_then(|t| t.isolation), None);
    }
}
