//! Warm pools: which creates a pool of started sandboxes can serve. A pool holds
//! containers made as a create of its [`Shape`] (a template or an image, and a network
//! mode) with the default limits would make them. Other limits are applied to a member
//! on claim (the engine updates CPU, memory and pids of a running container); a create
//! that asks for anything else of its container (another workdir, volumes, a snapshot)
//! is served cold. Pools are kept per engine: the caller looks in the pools of the
//! engine the create goes to. How many members a pool kept for demand holds is
//! `pool_demand`'s.
//!
//! A template users built is a shape of its own ([`Built`]): one version's image, its
//! workdir and its isolation, named by the build, so that two projects' templates of one
//! name never share a pool, and a new version gets a pool of its own.
//!
//! `pool_for` gives the `Shape` of pool that can serve a create, and whether the claimed
//! container's limits must then be updated.

use crate::limits::{DEFAULT_CPU, DEFAULT_MEMORY_MB, DEFAULT_PIDS_LIMIT, DEFAULT_WORKDIR};
use crate::model::NetworkMode;
use crate::template_build::TemplateBuild;
use crate::templates::Templates;
use crate::validate::CreateSandbox;

/// What a pool's members are made of: everything a started container cannot change.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// The template giving the user, the workdir and the isolation (and the image when
    /// `image` is `None`).
    pub template: Option<String>,
    /// An image other than the template's; with no template, the workdir is the
    /// default one and the user the image's.
    pub image: Option<String>,
    pub network: NetworkMode,
    /// A built template's version (with `template` its name): its members are made of
    /// its image, in its workdir.
    pub built: Option<Built>,
}

/// What a pool of a built template's version is made of.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Built {
    pub build_id: String,
    pub image: String,
    pub workdir: String,
    /// `container` or `gvisor`, when the build names one.
    pub isolation: Option<String>,
}

impl Built {
    /// The shape of a ready build, `None` while it has no image.
    pub fn of(build: &TemplateBuild) -> Option<Self> {
        Some(Self {
            build_id: build.build_id.clone(),
            image: build.image.clone()?,
            workdir: build
                .workdir
                .clone()
                .unwrap_or_else(|| DEFAULT_WORKDIR.to_owned()),
            isolation: build.isolation.clone(),
        })
    }
}

impl Shape {
    /// The shape of a configured pool: a template's image, `isolated`.
    pub fn of_template(template: &str) -> Self {
        Self {
            template: Some(template.to_owned()),
            image: None,
            network: NetworkMode::Isolated,
            built: None,
        }
    }

    /// The shape of a pool of a built template's version, `isolated`.
    pub fn of_built(name: &str, built: Built) -> Self {
        Self {
            built: Some(built),
            ..Self::of_template(name)
        }
    }

    /// The template of a configured pool of this shape, if it is one's.
    pub fn configured_template(&self) -> Option<&str> {
        match (&self.template, &self.image, self.network, &self.built) {
            (Some(template), None, NetworkMode::Isolated, None) => Some(template),
            _ => None,
        }
    }

    /// The name metrics and the container's pool label give it: its image, or its
    /// template (a built template's image: names are its users').
    pub fn label(&self) -> &str {
        self.image
            .as_deref()
            .or(self.built.as_ref().map(|b| b.image.as_str()))
            .or(self.template.as_deref())
            .unwrap_or_default()
    }

    /// The image its members are made of, when not the configured template's.
    pub fn own_image(&self) -> Option<&str> {
        self.image
            .as_deref()
            .or(self.built.as_ref().map(|b| b.image.as_str()))
    }

    /// The workdir of its members (and of the sandboxes claimed from it).
    pub fn workdir<'t>(&'t self, templates: &'t Templates) -> &'t str {
        if let Some(built) = &self.built {
            return &built.workdir;
        }
        self.template
            .as_deref()
            .and_then(|name| templates.get(name))
            .map_or(DEFAULT_WORKDIR, |t| t.workdir.as_str())
    }
}

/// The pool that can serve a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolMatch {
    pub shape: Shape,
    /// The create asks for other limits than the members were made with: the claimed
    /// container's limits are updated first.
    pub update_limits: bool,
}

/// The shape of pool that can serve `cmd`, if any can. Environment variables, name,
/// labels, egress list and timeout do not matter: they are applied on claim (the
/// variables to every command, since a started container's environment is fixed).
/// `built`: the version of a built template the create's `template` names.
pub fn pool_for(
    cmd: &CreateSandbox,
    templates: &Templates,
    built: Option<&Built>,
) -> Option<PoolMatch> {
    // A started container's mounts are fixed: one with volumes is made for them.
    if !cmd.volumes.is_empty() || cmd.image.snapshot.is_some() {
        return None;
    }
    let shape = match built {
        Some(built) => {
            if cmd.image.image.is_some() {
                return None;
            }
            Shape {
                network: cmd.network_mode,
                ..Shape::of_built(cmd.image.template.as_deref()?, built.clone())
            }
        }
        None => {
            let template = match cmd.image.template.as_deref() {
                Some(name) => Some((name, templates.get(name)?)),
                None => None,
            };
            let image = match (&cmd.image.image, template) {
                (Some(image), Some((_, t))) if *image == t.image => None,
                (Some(image), _) => Some(image.clone()),
                (None, Some(_)) => None,
                (None, None) => return None,
            };
            Shape {
                template: template.map(|(name, _)| name.to_owned()),
                image,
                network: cmd.network_mode,
                built: None,
            }
        }
    };
    if cmd
        .workdir
        .as_deref()
        .is_some_and(|w| w != shape.workdir(templates))
    {
        return None;
    }
    let default_limits = cmd.cpu == DEFAULT_CPU
        && cmd.memory_mb == DEFAULT_MEMORY_MB
        && cmd.pids_limit == DEFAULT_PIDS_LIMIT;
    Some(PoolMatch {
        shape,
        update_limits: !default_limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::DEFAULT_TIMEOUT_MS;
    use crate::validate::ImageChoice;

    fn pool_for_configured(cmd: &CreateSandbox, templates: &Templates) -> Option<PoolMatch> {
        pool_for(cmd, templates, None)
    }

    fn create(template: &str) -> CreateSandbox {
        CreateSandbox {
            environment_id: "env".into(),
            name: Some("n".into()),
            image: ImageChoice {
                template: Some(template.into()),
                image: None,
                snapshot: None,
                template_build: None,
            },
            server_id: None,
            cpu: DEFAULT_CPU,
            memory_mb: DEFAULT_MEMORY_MB,
            pids_limit: DEFAULT_PIDS_LIMIT,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            network_mode: NetworkMode::Isolated,
            env_vars: Some("A=1".into()),
            workdir: None,
            labels: [("tenant".to_owned(), "t-1".to_owned())].into(),
            egress: Vec::new(),
            egress_credentials: Vec::new(),
            auto_pause: None,
            fixed_timeout: false,
            paused_timeout_ms: crate::limits::DEFAULT_PAUSED_TIMEOUT_MS,
            volumes: Vec::new(),
            isolation: None,
        }
    }

    #[test]
    fn a_plain_create_of_a_template_is_served_by_its_configured_pool() {
        let templates = Templates::default();
        let matched = pool_for_configured(&create("python"), &templates).unwrap();
        assert_eq!(matched.shape, Shape::of_template("python"));
        assert_eq!(matched.shape.configured_template(), Some("python"));
        assert!(!matched.update_limits);
        let mut same_image = create("python");
        same_image.image.image = Some(templates.get("python").unwrap().image.clone());
        assert_eq!(
            pool_for_configured(&same_image, &templates).unwrap().shape,
            Shape::of_template("python"),
            "naming the template's own image changes nothing"
        );
    }

    #[test]
    fn other_limits_are_served_with_an_update() {
        let templates = Templates::default();
        let variants: [fn(&mut CreateSandbox); 3] = [
            |c| c.cpu = 2.0,
            |c| c.memory_mb = 1024,
            |c| c.pids_limit = 64,
        ];
        for change in variants {
            let mut cmd = create("python");
            change(&mut cmd);
            let matched = pool_for_configured(&cmd, &templates).unwrap();
            assert!(matched.update_limits, "{cmd:?}");
        }
    }

    #[test]
    fn another_network_or_image_is_another_shape() {
        let templates = Templates::default();
        let mut internet = create("python");
        internet.network_mode = NetworkMode::Internet;
        let shape = pool_for_configured(&internet, &templates).unwrap().shape;
        assert_eq!(shape.network, NetworkMode::Internet);
        assert_eq!(shape.configured_template(), None);

        let mut image = create("python");
        image.image.image = Some("other:1".into());
        let shape = pool_for_configured(&image, &templates).unwrap().shape;
        assert_eq!(
            (
                shape.template.as_deref(),
                shape.image.as_deref(),
                shape.label()
            ),
            (Some("python"), Some("other:1"), "other:1")
        );

        let mut bare = create("python");
        bare.image = ImageChoice {
            template: None,
            image: Some("other:1".into()),
            snapshot: None,
            template_build: None,
        };
        bare.workdir = Some(DEFAULT_WORKDIR.into());
        let shape = pool_for_configured(&bare, &templates).unwrap().shape;
        assert_eq!(
            (shape.template, shape.image.as_deref()),
            (None, Some("other:1"))
        );
    }

    #[test]
    fn another_workdir_volumes_a_snapshot_or_an_unknown_template_go_cold() {
        let templates = Templates::default();
        let variants: [fn(&mut CreateSandbox); 5] = [
            |c| {
                c.volumes = vec![crate::volumes::VolumeMount {
                    volume_id: "v".into(),
                    path: "/data".into(),
                    read_only: false,
                }]
            },
            |c| c.workdir = Some("/elsewhere".into()),
            |c| c.image.snapshot = Some("snap".into()),
            |c| c.image.template = Some("nope".into()),
            |c| {
                c.image.template = None;
                c.image.image = Some("other:1".into());
                c.workdir = Some("/elsewhere".into());
            },
        ];
        for change in variants {
            let mut cmd = create("python");
            change(&mut cmd);
            assert_eq!(pool_for_configured(&cmd, &templates), None, "{cmd:?}");
        }
    }

    fn built(build_id: &str) -> Built {
        Built {
            build_id: build_id.into(),
            image: format!("sandboxd-templates:{build_id}"),
            workdir: "/app".into(),
            isolation: None,
        }
    }

    #[test]
    fn a_built_template_s_version_is_a_shape_of_its_own() {
        let templates = Templates::default();
        let cmd = create("mine");
        let one = pool_for(&cmd, &templates, Some(&built("b1")))
            .unwrap()
            .shape;
        assert_eq!(one, Shape::of_built("mine", built("b1")));
        assert_eq!(
            (one.label(), one.own_image(), one.workdir(&templates)),
            (
                "sandboxd-templates:b1",
                Some("sandboxd-templates:b1"),
                "/app"
            )
        );
        assert_eq!(one.configured_template(), None, "never a configured pool");
        let two = pool_for(&cmd, &templates, Some(&built("b2")))
            .unwrap()
            .shape;
        assert_ne!(one, two, "another version, another pool");

        let mut elsewhere = create("mine");
        elsewhere.workdir = Some("/elsewhere".into());
        assert_eq!(pool_for(&elsewhere, &templates, Some(&built("b1"))), None);
        let mut image = create("mine");
        image.image.image = Some("other:1".into());
        assert_eq!(pool_for(&image, &templates, Some(&built("b1"))), None);
        let mut internet = create("mine");
        internet.network_mode = NetworkMode::Internet;
        assert_eq!(
            pool_for(&internet, &templates, Some(&built("b1")))
                .unwrap()
                .shape
                .network,
            NetworkMode::Internet
        );
    }
}
