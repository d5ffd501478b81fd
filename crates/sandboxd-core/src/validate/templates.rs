//! Checks of `template.*`: a build's name, Dockerfile (read, checked into a `Recipe`, and
//! its steps tried on an empty base so what cannot be done is refused before any
//! container), files (names, base64, count and bytes), CPU, memory and network.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{BuildTemplateRequest, Encoding};
use crate::error::{Invalid, Issues};
use crate::limits::{MAX_CPU, MAX_MEMORY_MB, MIN_CPU, MIN_MEMORY_MB};
use crate::model::{Isolation, NetworkMode};
use crate::template_build::{
    Action, FileBody, FileBounds, Instruction, Recipe, Settings, Steps, check, check_file_names,
    parse,
};
use crate::templates::TEMPLATE_NAMES;

use super::required_id;

/// The CPUs and memory of a build whose request names none.
pub const DEFAULT_BUILD_CPU: f64 = 1.0;
pub const DEFAULT_BUILD_MEMORY_MB: i64 = 1024;

/// A checked `template.build`.
#[derive(Debug, Clone)]
pub struct BuildTemplate {
    pub name: String,
    pub project_id: Option<String>,
    /// Every instruction, `FROM` among them.
    pub instructions: Vec<Instruction>,
    pub recipe: Recipe,
    pub files: BTreeMap<String, FileBody>,
    /// The build context the stored files of `files` are read from.
    pub context_id: Option<String>,
    /// The mode of each file given with one (`0644` for the others).
    pub modes: BTreeMap<String, u32>,
    /// Symbolic links given among the files: name → what it points to (copied as
    /// links, as E2B's builder sends them).
    pub links: BTreeMap<String, String>,
    pub cpu: f64,
    pub memory_mb: i64,
    pub isolation: Option<Isolation>,
    pub network: NetworkMode,
    /// The first step whose cached image is not used (it and every step after it run
    /// again); `None`: every cached step is used.
    pub fresh_from: Option<i64>,
    /// A command run in each new sandbox after the start command until it succeeds,
    /// before the create answers.
    pub ready: Option<Vec<String>>,
}

/// The files a build is given: contents, the modes of some, and links.
#[derive(Debug, Clone, Default)]
pub struct GivenFiles {
    pub contents: BTreeMap<String, FileBody>,
    pub modes: BTreeMap<String, u32>,
    pub links: BTreeMap<String, String>,
}

/// The longest target a link may have.
pub const MAX_LINK_TARGET: usize = 4096;

/// What a build is asked for besides its steps and files.
#[derive(Debug, Clone, Default)]
pub struct BuildHead {
    pub name: String,
    pub project_id: Option<String>,
    pub cpu: Option<f64>,
    pub memory_mb: Option<i64>,
    pub isolation: Option<Isolation>,
    pub network: Option<NetworkMode>,
}

/// Whether `name` is a template's name: 1–64 lower-case letters, digits, `.`, `_`, `-`,
/// starting with a letter or digit.
pub fn template_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
}

/// The offset of `template.buildLog` and its stream: 0 unless given, never negative.
pub fn build_log_offset(offset: Option<i64>) -> Result<i64, Invalid> {
    match offset {
        Some(offset) if offset < 0 => Err(Invalid::one("offset", "must be 0 or more")),
        offset => Ok(offset.unwrap_or(0)),
    }
}

/// A `template.build` checked as far as it can be before its context is read.
#[derive(Debug, Clone)]
pub enum BuildAsked {
    /// Its files came with it: checked whole.
    Whole(Box<BuildTemplate>),
    /// It names a context; `build_of` checks it once the context's index is read.
    WithContext {
        context_id: String,
        head: BuildHead,
        instructions: Vec<Instruction>,
    },
}

/// Checks `template.build`, with its files or naming a context.
pub fn build_asked(mut req: BuildTemplateRequest) -> Result<BuildAsked, Invalid> {
    let Some(context_id) = req.context_id.take() else {
        return Ok(BuildAsked::Whole(Box::new(build_template(req)?)));
    };
    let mut issues = Issues::default();
    required_id(&mut issues, "contextId", &context_id);
    if req.files.is_some() || req.file_modes.is_some() {
        issues.push(
            "contextId",
            "a build reads its files from `files` or from a context, not both",
        );
    }
    issues.finish(())?;
    let instructions = parse(&req.dockerfile)?;
    Ok(BuildAsked::WithContext {
        context_id,
        head: head_of(&req),
        instructions,
    })
}

fn head_of(req: &BuildTemplateRequest) -> BuildHead {
    BuildHead {
        name: req.name.clone(),
        project_id: req.project_id.clone(),
        cpu: req.cpu,
        memory_mb: req.memory_mb,
        isolation: req.isolation,
        network: req.network_mode,
    }
}

/// Checks `template.build` with its files.
pub fn build_template(mut req: BuildTemplateRequest) -> Result<BuildTemplate, Invalid> {
    let mut issues = Issues::default();
    let raw = req.files.take().unwrap_or_default();
    let mut files = BTreeMap::new();
    for (name, content) in raw {
        match Encoding::Base64.decode(content) {
            Some(bytes) => {
                files.insert(name, FileBody::Bytes(bytes));
            }
            None => issues.push(format!("files.{name}"), "is not valid base64"),
        }
    }
    let mut modes = BTreeMap::new();
    for (name, mode) in req.file_modes.take().unwrap_or_default() {
        if !files.contains_key(&name) {
            issues.push(format!("fileModes.{name}"), "names no file of files");
            continue;
        }
        match crate::template_build::octal_mode(&mode) {
            Some(0o644) => {}
            Some(mode) => {
                modes.insert(name, mode);
            }
            None => issues.push(format!("fileModes.{name}"), "is not an octal mode (`0755`)"),
        }
    }
    issues.finish(())?;
    let head = head_of(&req);
    let instructions = parse(&req.dockerfile)?;
    let given = GivenFiles {
        contents: files,
        modes,
        links: BTreeMap::new(),
    };
    build_of(head, instructions, given, FileBounds::GIVEN)
}

/// Checks a build given as instructions: its head, the files' names, count and bytes
/// (within `bounds`), the instructions against the files, and the steps tried on an
/// empty base, so that what cannot be done whatever the base is a 400 now.
pub fn build_of(
    head: BuildHead,
    instructions: Vec<Instruction>,
    given: GivenFiles,
    bounds: FileBounds,
) -> Result<BuildTemplate, Invalid> {
    let GivenFiles {
        contents: files,
        modes,
        links,
    } = given;
    let mut issues = Issues::default();
    if !template_name_ok(&head.name) {
        issues.push(
            "name",
            "must be 1 to 64 lower-case letters, digits, `.`, `_` or `-`, starting with a letter or digit",
        );
    } else if TEMPLATE_NAMES.contains(&head.name.as_str()) {
        issues.push("name", "is a configured template's name");
    }
    if let Some(project) = &head.project_id {
        required_id(&mut issues, "projectId", project);
    }
    let cpu = head.cpu.unwrap_or(DEFAULT_BUILD_CPU);
    if !(MIN_CPU..=MAX_CPU).contains(&cpu) {
        issues.push("cpu", "must be between 0.1 and 64");
    }
    let memory_mb = head.memory_mb.unwrap_or(DEFAULT_BUILD_MEMORY_MB);
    if !(MIN_MEMORY_MB..=MAX_MEMORY_MB).contains(&memory_mb) {
        issues.push("memoryMb", "must be between 64 and 262144");
    }
    let network = head.network.unwrap_or_default();
    if network == NetworkMode::Allowlist {
        issues.push(
            "networkMode",
            "a build's steps run `isolated` or with `internet`",
        );
    }
    if let Err(invalid) = check_file_names(files.keys().chain(links.keys()).map(String::as_str)) {
        issues.extend(invalid);
    }
    if files.len() + links.len() > bounds.files {
        issues.push("files", format!("are more than {}", bounds.files));
    }
    for (name, target) in &links {
        if target.is_empty() || target.len() > MAX_LINK_TARGET || target.contains('\0') {
            issues.push(
                format!("files.{name}"),
                format!("a link points to 1 to {MAX_LINK_TARGET} bytes, without NUL"),
            );
        }
    }
    let total: u64 = files.values().map(FileBody::len).sum();
    if total > bounds.bytes {
        issues.push(
            "files",
            format!("hold {total} bytes; at most {} are taken", bounds.bytes),
        );
    }
    issues.finish(())?;
    let names: BTreeSet<String> = files.keys().chain(links.keys()).cloned().collect();
    let recipe = check(&instructions, &names)?;
    let mut steps = Steps::new(Settings::default());
    let after_from = instructions
        .iter()
        .skip_while(|i| i.keyword != "FROM")
        .skip(1);
    let (mut copied, mut copied_bytes) = (0usize, 0u64);
    for instruction in after_from {
        if let Action::Copy { targets, .. } = steps.next_action(instruction, &names)? {
            copied += targets.len();
            copied_bytes += targets
                .iter()
                .map(|t| files.get(&t.file).map_or(0, FileBody::len))
                .sum::<u64>();
            if copied > bounds.files || copied_bytes > bounds.copied_bytes() {
                return Err(Invalid::one(
                    "dockerfile",
                    format!(
                        "line {}: the copies would put more than {} files or {} MiB in place",
                        instruction.line,
                        bounds.files,
                        bounds.copied_bytes() >> 20
                    ),
                ));
            }
        }
    }
    Ok(BuildTemplate {
        name: head.name,
        project_id: head.project_id,
        instructions,
        recipe,
        files,
        context_id: None,
        modes,
        links,
        cpu,
        memory_mb,
        isolation: head.isolation,
        network,
        fresh_from: None,
        ready: None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn request(dockerfile: &str) -> BuildTemplateRequest {
        BuildTemplateRequest {
            name: "app".into(),
            dockerfile: dockerfile.into(),
            files: Some(BTreeMap::from([("a.txt".into(), "aGk=".into())])),
            ..Default::default()
        }
    }

    #[test]
    fn file_modes_are_octal_and_name_given_files() {
        let mut req = request("FROM base\nCOPY a.txt /a\n");
        req.file_modes = Some(BTreeMap::from([("a.txt".into(), "0755".into())]));
        assert_eq!(
            build_template(req.clone()).unwrap().modes,
            BTreeMap::from([("a.txt".to_owned(), 0o755)])
        );
        req.file_modes = Some(BTreeMap::from([("a.txt".into(), "0644".into())]));
        assert!(build_template(req.clone()).unwrap().modes.is_empty());
        for (name, mode, wanted) in [
            ("b.txt", "0755", "names no file"),
            ("a.txt", "rwx", "octal"),
            ("a.txt", "17777", "octal"),
        ] {
            req.file_modes = Some(BTreeMap::from([(name.into(), mode.into())]));
            let error = build_template(req.clone()).unwrap_err().to_string();
            assert!(
                error.contains(wanted) && error.contains("fileModes"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_good_build_is_taken() {
        let build = build_template(request("FROM base\nCOPY a.txt /a\nRUN cat /a\n")).unwrap();
        assert_eq!(build.files["a.txt"], FileBody::Bytes(b"hi".to_vec()));
        assert_eq!(build.recipe.from, "base");
        assert_eq!(build.network, NetworkMode::Isolated);
    }

    #[test]
    fn each_bad_field_is_named() {
        type Change = fn(&mut BuildTemplateRequest);
        let cases: [(Change, &str); 7] = [
            (|r| r.name = "Base".into(), "name"),
            (|r| r.name = "python".into(), "configured template"),
            (|r| r.cpu = Some(0.0), "cpu"),
            (
                |r| r.network_mode = Some(NetworkMode::Allowlist),
                "networkMode",
            ),
            (
                |r| {
                    r.files = Some(BTreeMap::from([("../x".into(), "aGk=".into())]));
                },
                "files.../x",
            ),
            (
                |r| r.dockerfile = "FROM b\nCOPY missing /m\n".into(),
                "line 2",
            ),
            (
                |r| r.dockerfile = "FROM b\nCOPY --chown=app a.txt /a\n".into(),
                "--chown",
            ),
        ];
        for (change, wanted) in cases {
            let mut req = request("FROM base\n");
            change(&mut req);
            let error = build_template(req).unwrap_err().to_string();
            assert!(error.contains(wanted), "{wanted}: {error}");
        }
    }
}
