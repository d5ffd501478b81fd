//! Warm pools: which creates a pool of started sandboxes can serve. A pool belongs to a
//! template and holds containers made as a create of that template with the default
//! limits and isolated networking would make them. Other limits are applied to a member
//! on claim (the engine updates CPU, memory and pids of a running container); a create
//! that asks for anything else (image, workdir, network, volumes) is served cold. Pools are kept
//! per engine: the caller passes the pools of the engine the create goes to.

use crate::limits::{DEFAULT_CPU, DEFAULT_MEMORY_MB, DEFAULT_PIDS_LIMIT};
use crate::model::NetworkMode;
use crate::templates::Templates;
use crate::validate::CreateSandbox;

/// A pool that can serve a create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolMatch<'a> {
    /// The pool (template name).
    pub pool: &'a str,
    /// The create asks for other limits than the members were made with: the claimed
    /// container's limits are updated first.
    pub update_limits: bool,
}

/// The pool that can serve `cmd`, if it matches one of `pooled` (the pools of the
/// engine the create goes to). Environment
/// variables, name and timeout do not matter: they are applied on claim (the variables
/// to every command, since a started container's environment is fixed).
pub fn pool_for<'a>(
    cmd: &CreateSandbox,
    templates: &Templates,
    pooled: impl IntoIterator<Item = &'a str>,
) -> Option<PoolMatch<'a>> {
    let name = cmd.image.template.as_deref()?;
    let template = templates.get(name)?;
    let same_image = cmd
        .image
        .image
        .as_deref()
        .is_none_or(|i| i == template.image);
    let same_workdir = cmd.workdir.as_deref().is_none_or(|w| w == template.workdir);
    let default_limits = cmd.cpu == DEFAULT_CPU
        && cmd.memory_mb == DEFAULT_MEMORY_MB
        && cmd.pids_limit == DEFAULT_PIDS_LIMIT;
    // A started container's mounts are fixed: one with volumes is made for them.
    let plain = same_image
        && same_workdir
        && cmd.network_mode == NetworkMode::Isolated
        && cmd.volumes.is_empty();
    if !plain {
        return None;
    }
    let pool = pooled.into_iter().find(|pool| *pool == name)?;
    Some(PoolMatch {
        pool,
        update_limits: !default_limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::DEFAULT_TIMEOUT_MS;
    use crate::validate::ImageChoice;

    fn create(template: &str) -> CreateSandbox {
        CreateSandbox {
            environment_id: "env".into(),
            name: Some("n".into()),
            image: ImageChoice {
                template: Some(template.into()),
                image: None,
                snapshot: None,
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
            auto_pause: false,
            fixed_timeout: false,
            paused_timeout_ms: crate::limits::DEFAULT_PAUSED_TIMEOUT_MS,
            volumes: Vec::new(),
            isolation: None,
        }
    }

    #[test]
    fn a_plain_create_of_a_pooled_template_is_served_by_its_pool() {
        let templates = Templates::default();
        assert_eq!(
            pool_for(&create("python"), &templates, ["python"]),
            Some(PoolMatch {
                pool: "python",
                update_limits: false
            })
        );
        assert_eq!(pool_for(&create("base"), &templates, ["python"]), None);
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
            let matched = pool_for(&cmd, &templates, ["python"]).unwrap();
            assert!(matched.update_limits, "{cmd:?}");
        }
    }

    #[test]
    fn another_image_workdir_network_or_volumes_goes_cold() {
        let templates = Templates::default();
        let variants: [fn(&mut CreateSandbox); 5] = [
            |c| {
                c.volumes = vec![crate::volumes::VolumeMount {
                    volume_id: "v".into(),
                    path: "/data".into(),
                    read_only: false,
                }]
            },
            |c| c.network_mode = NetworkMode::Internet,
            |c| c.network_mode = NetworkMode::Allowlist,
            |c| c.workdir = Some("/elsewhere".into()),
            |c| c.image.image = Some("other:1".into()),
        ];
        for change in variants {
            let mut cmd = create("python");
            change(&mut cmd);
            assert_eq!(pool_for(&cmd, &templates, ["python"]), None, "{cmd:?}");
        }
    }
}
