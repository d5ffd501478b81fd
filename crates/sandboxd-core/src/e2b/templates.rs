//! E2B's template builder as sandboxd serves it: the wire format of E2B's SDK
//! (`Template().from_template(…).run_cmd(…).copy(…)…`, `Template.build`), its steps
//! turned into the instructions of a sandboxd build (`plan`), the archives its SDK
//! uploads for each `COPY` read into the build's files (`read_archive`), and a build's
//! status and log in E2B's form (`status_answer`).
//!
//! E2B's steps run as `user` in `/home/user` unless they say otherwise, so the plan
//! starts with `USER user` and `WORKDIR /home/user`. A `RUN` as another user is that
//! user around the `RUN`. A `COPY` is owned by its user (or the current one), named as
//! E2B names them (`root`, `user`) or as numbers. Every value is quoted, so nothing in
//! it is read as a variable. The start command becomes `CMD`; the ready command is run
//! in each new sandbox until it succeeds.

use serde::{Deserialize, Serialize};

use crate::error::Invalid;
use crate::template_build::{FileBounds, InMemory, Instruction, LogLine, TemplateBuild, read_tar};
use crate::validate::GivenFiles;

/// The image E2B's `from_base_image()` names; sandboxd's `base` stands for it.
pub const E2B_BASE_IMAGE: &str = "e2bdev/base";
/// The user and workdir E2B's steps start with.
pub const E2B_USER: &str = "user";
pub const E2B_WORKDIR: &str = "/home/user";
/// The uid and gid of `user` in sandboxd's images.
const USER_IDS: &str = "1000:1000";
/// The most log entries one status answers (E2B's page).
pub const MAX_STATUS_ENTRIES: i64 = 100;
/// The step names E2B gives the base and the end of a build.
pub const BASE_STEP: &str = "base";
pub const FINALIZE_STEP: &str = "finalize";

/// Body of `POST /v3/templates`; other fields are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRequest {
    pub name: Option<String>,
    /// Older SDKs' name.
    pub alias: Option<String>,
    pub tags: Option<Vec<String>>,
    pub cpu_count: Option<i64>,
    #[serde(rename = "memoryMB")]
    pub memory_mb: Option<i64>,
}

/// Answer of `POST /v3/templates` (202).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRequestAnswer {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "buildID")]
    pub build_id: String,
    pub public: bool,
    pub names: Vec<String>,
    pub tags: Vec<String>,
    pub aliases: Vec<String>,
}

/// The name and tags of a `POST /v3/templates`: `name` or `alias`, a `:tag` after the
/// name taken as a tag; `default` when none is given.
pub fn name_and_tags(request: &TemplateRequest) -> Result<(String, Vec<String>), Invalid> {
    let given = request
        .name
        .as_deref()
        .or(request.alias.as_deref())
        .ok_or_else(|| Invalid::one("name", "is required"))?;
    let (name, tag) = match given.split_once(':') {
        Some((name, tag)) => (name, Some(tag)),
        None => (given, None),
    };
    let mut tags: Vec<String> = request.tags.clone().unwrap_or_default();
    tags.extend(tag.map(str::to_owned));
    if tags.is_empty() {
        tags.push("default".into());
    }
    if tags.len() > 16
        || tags
            .iter()
            .any(|t| t.is_empty() || t.len() > 64 || t.chars().any(|c| c.is_control()))
    {
        return Err(Invalid::one(
            "tags",
            "at most 16 tags of 1 to 64 printable characters",
        ));
    }
    Ok((name.to_owned(), tags))
}

/// Answer of `GET /templates/{id}/files/{hash}` (201).
#[derive(Debug, Clone, Serialize)]
pub struct FileUploadAnswer {
    pub present: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Whether `hash` is a files hash as E2B's SDK makes them (SHA-256, hex).
pub fn files_hash_ok(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One step of `POST /v2/templates/{id}/builds/{buildID}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub args: Vec<String>,
    pub files_hash: Option<String>,
    #[serde(default)]
    pub force: bool,
}

/// Body of `POST /v2/templates/{id}/builds/{buildID}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildStart {
    pub from_image: Option<String>,
    pub from_template: Option<String>,
    pub from_image_registry: Option<serde_json::Value>,
    #[serde(default)]
    pub force: bool,
    #[serde(default)]
    pub steps: Vec<Step>,
    pub start_cmd: Option<String>,
    pub ready_cmd: Option<String>,
}

/// What a build of E2B's steps does, in sandboxd's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `FROM` first.
    pub instructions: Vec<Instruction>,
    /// For each of sandboxd's steps (from 1, `FROM`), the E2B step it came from.
    pub steps: Vec<String>,
    /// The files hash of each `COPY`, in order.
    pub copies: Vec<String>,
    /// The first of sandboxd's steps run again whatever the cache holds.
    pub fresh_from: Option<i64>,
    pub ready: Option<Vec<String>>,
}

/// The most steps one build takes.
pub const MAX_STEPS: usize = 500;

fn shell(command: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), command.into()]
}

/// `value` as one word the builder reads back as written (`'…'`, with `'` as `'\''`).
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

fn json(values: &[String]) -> String {
    serde_json::to_string(values).unwrap_or_default()
}

/// A user as `COPY --chown` takes it: E2B's names (`root`, `user`) or numbers.
fn owner_ids(owner: &str) -> Option<String> {
    let one = |name: &str| match name {
        "root" => Some("0".to_owned()),
        "user" => Some("1000".to_owned()),
        digits if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Some(digits.to_owned())
        }
        _ => None,
    };
    if owner == E2B_USER {
        return Some(USER_IDS.into());
    }
    match owner.split_once(':') {
        Some((user, group)) => Some(format!("{}:{}", one(user)?, one(group)?)),
        None => one(owner),
    }
}

/// E2B's steps as a sandboxd build.
pub fn plan(start: &BuildStart) -> Result<Plan, Invalid> {
    if start.from_image_registry.is_some() {
        return Err(Invalid::one(
            "fromImageRegistry",
            "sandboxd pulls no image: build from an image the server holds, or a template",
        ));
    }
    if start.steps.len() > MAX_STEPS {
        return Err(Invalid::one(
            "steps",
            format!("at most {MAX_STEPS} steps are taken"),
        ));
    }
    let from = match (&start.from_template, &start.from_image) {
        (Some(template), None) => template.clone(),
        (None, Some(image)) if image == E2B_BASE_IMAGE || image == "e2bdev/base:latest" => {
            "base".into()
        }
        (None, Some(image)) => image.clone(),
        _ => {
            return Err(Invalid::one(
                "fromImage",
                "give fromImage or fromTemplate, one of them",
            ));
        }
    };
    if from.is_empty() || from.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Invalid::one(
            "fromImage",
            "is not an image's or template's name",
        ));
    }
    let mut out = Out::default();
    out.push("FROM", from, BASE_STEP.into());
    if start.force {
        out.fresh_from = Some(2);
    }
    let mut user = E2B_USER.to_owned();
    out.push("USER", quoted(&user), BASE_STEP.into());
    out.push("WORKDIR", quoted(E2B_WORKDIR), BASE_STEP.into());
    for (index, step) in start.steps.iter().enumerate() {
        let name = (index + 1).to_string();
        let bad = |message: &str| Invalid::one(format!("steps.{index}"), message.to_owned());
        if step.force && out.fresh_from.is_none() {
            out.fresh_from = Some(out.instructions.len() as i64 + 1);
        }
        match (step.kind.as_str(), step.args.as_slice()) {
            ("RUN", [command]) => out.push("RUN", json(&shell(command)), name),
            ("RUN", [command, as_user]) if as_user.is_empty() || *as_user == user => {
                out.push("RUN", json(&shell(command)), name);
            }
            ("RUN", [command, as_user]) => {
                out.push("USER", quoted(as_user), name.clone());
                out.push("RUN", json(&shell(command)), name.clone());
                out.push("USER", quoted(&user), name);
            }
            ("COPY", [src, dest, rest @ ..]) if rest.len() <= 2 => {
                let hash = step
                    .files_hash
                    .clone()
                    .filter(|h| files_hash_ok(h))
                    .ok_or_else(|| bad("a COPY needs its filesHash (SHA-256, hex)"))?;
                let owner = rest.first().filter(|o| !o.is_empty()).unwrap_or(&user);
                let ids = owner_ids(owner).ok_or_else(|| {
                    bad(&format!(
                        "COPY owned by `{owner}`: name `root`, `user` or give numbers (`uid:gid`)"
                    ))
                })?;
                let mut flags = format!("--chown={ids}");
                if let Some(mode) = rest.get(1).filter(|m| !m.is_empty()) {
                    if mode.len() > 5 || !mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                        return Err(bad(&format!("COPY mode `{mode}` is not an octal mode")));
                    }
                    flags.push_str(&format!(" --chmod={mode}"));
                }
                let words = [src.clone(), quoted(dest)];
                out.push("COPY", format!("{flags} {}", json(&words)), name);
                out.copies.push(hash);
            }
            ("ENV", pairs) if !pairs.is_empty() && pairs.len() % 2 == 0 => {
                let text: Vec<String> = pairs
                    .chunks(2)
                    .map(|pair| format!("{}={}", quoted(&pair[0]), quoted(&pair[1])))
                    .collect();
                out.push("ENV", text.join(" "), name);
            }
            ("WORKDIR", [path]) => out.push("WORKDIR", quoted(path), name),
            ("USER", [as_user]) => {
                user = as_user.clone();
                out.push("USER", quoted(as_user), name);
            }
            (kind @ ("RUN" | "COPY" | "ENV" | "WORKDIR" | "USER"), _) => {
                return Err(bad(&format!("{kind} with these arguments is not taken")));
            }
            (kind, _) => {
                return Err(bad(&format!(
                    "{kind} is not taken (RUN, COPY, ENV, WORKDIR and USER are)"
                )));
            }
        }
    }
    if let Some(command) = &start.start_cmd {
        out.push("CMD", json(&shell(command)), FINALIZE_STEP.into());
    }
    out.ready = start.ready_cmd.as_deref().map(shell);
    Ok(Plan {
        instructions: out.instructions,
        steps: out.steps,
        copies: out.copies,
        fresh_from: out.fresh_from,
        ready: out.ready,
    })
}

#[derive(Default)]
struct Out {
    instructions: Vec<Instruction>,
    steps: Vec<String>,
    copies: Vec<String>,
    fresh_from: Option<i64>,
    ready: Option<Vec<String>>,
}

impl Out {
    fn push(&mut self, keyword: &str, args: String, step: String) {
        self.instructions.push(Instruction {
            line: self.instructions.len() + 1,
            keyword: keyword.into(),
            args,
        });
        self.steps.push(step);
    }
}

/// The files of one uploaded archive (a tar, gzipped or not, with paths relative to the
/// build's context) added to `given`, with their modes where not `0644`, and its
/// symbolic links as links (E2B copies them so unless told to resolve them); within the
/// bounds of files given to a build. Hard links and devices are refused.
pub fn read_archive(archive: &[u8], given: &mut GivenFiles) -> Result<(), String> {
    read_tar(
        archive,
        FileBounds::GIVEN,
        given,
        &mut InMemory,
        "copy with resolve_symlinks=True, so that what it names is sent",
    )
    .map_err(|e| e.to_string())
}

/// One log entry of a status.
#[derive(Debug, Clone, Serialize)]
pub struct LogEntry {
    pub timestamp: String,
    pub level: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// Why a build failed.
#[derive(Debug, Clone, Serialize)]
pub struct Reason {
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// Answer of `GET /templates/{id}/builds/{buildID}/status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusAnswer {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "buildID")]
    pub build_id: String,
    /// `waiting`, `building`, `ready` or `error`.
    pub status: &'static str,
    pub logs: Vec<String>,
    pub log_entries: Vec<LogEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

/// The E2B step of one of sandboxd's steps: as the plan named it, or, for a build of
/// sandboxd's own API (no names), its instruction's number after `FROM`.
fn step_name(steps: &[String], step: i64) -> String {
    match usize::try_from(step) {
        Ok(0 | 1) | Err(_) if steps.is_empty() => BASE_STEP.into(),
        Ok(n) if steps.is_empty() => (n - 1).to_string(),
        Ok(0) | Err(_) => BASE_STEP.into(),
        Ok(n) => steps
            .get(n - 1)
            .cloned()
            .unwrap_or_else(|| FINALIZE_STEP.into()),
    }
}

/// A status in E2B's form: a build that waits for its steps, or sandboxd's build with
/// the lines of its log from the offset asked.
pub fn status_answer(
    template_id: &str,
    build_id: &str,
    build: Option<&TemplateBuild>,
    steps: &[String],
    lines: &[LogLine],
    time: impl Fn(i64) -> String,
) -> StatusAnswer {
    let entries: Vec<LogEntry> = lines
        .iter()
        .map(|line| LogEntry {
            timestamp: time(line.time),
            level: if line.stream == "system" && line.line.starts_with("error:") {
                "error"
            } else {
                "info"
            },
            message: line.line.clone(),
            step: Some(step_name(steps, line.step)),
        })
        .collect();
    let (status, reason) = match build {
        None => ("waiting", None),
        Some(build) => match build.status.as_str() {
            crate::template_build::READY => ("ready", None),
            crate::template_build::FAILED => (
                "error",
                Some(Reason {
                    message: build
                        .error_message
                        .clone()
                        .unwrap_or_else(|| "the build failed".into()),
                    step: build.error_step.map(|step| step_name(steps, step)),
                }),
            ),
            _ => ("building", None),
        },
    };
    StatusAnswer {
        template_id: template_id.to_owned(),
        build_id: build_id.to_owned(),
        status,
        logs: entries.iter().map(|e| e.message.clone()).collect(),
        log_entries: entries,
        reason,
    }
}

/// Answer of `GET /templates/aliases/{alias}`.
#[derive(Debug, Clone, Serialize)]
pub struct AliasAnswer {
    #[serde(rename = "templateID")]
    pub template_id: String,
    pub public: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn step(kind: &str, args: &[&str]) -> Step {
        Step {
            kind: kind.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            files_hash: (kind == "COPY").then(|| "ab".repeat(32)),
            force: false,
        }
    }

    fn lines(plan: &Plan) -> Vec<String> {
        plan.instructions
            .iter()
            .map(|i| format!("{} {}", i.keyword, i.args))
            .collect()
    }

    #[test]
    fn steps_become_instructions_with_their_e2b_step() {
        let start = BuildStart {
            from_image: Some(E2B_BASE_IMAGE.into()),
            steps: vec![
                step("RUN", &["echo $HOME"]),
                step("RUN", &["apt-get update", "root"]),
                step("COPY", &["app/", "/app", "", "0755"]),
                step("ENV", &["A", "it's $x", "B", ""]),
                step("WORKDIR", &["/app"]),
                step("USER", &["root"]),
                step("COPY", &["a.txt", "/a.txt", "user", ""]),
            ],
            start_cmd: Some("python -m http.server".into()),
            ready_cmd: Some("test -f /tmp/ready".into()),
            ..Default::default()
        };
        let plan = plan(&start).unwrap();
        assert_eq!(
            lines(&plan),
            [
                "FROM base",
                "USER 'user'",
                "WORKDIR '/home/user'",
                r#"RUN ["/bin/sh","-c","echo $HOME"]"#,
                "USER 'root'",
                r#"RUN ["/bin/sh","-c","apt-get update"]"#,
                "USER 'user'",
                r#"COPY --chown=1000:1000 --chmod=0755 ["app/","'/app'"]"#,
                r#"ENV 'A'='it'\''s $x' 'B'=''"#,
                "WORKDIR '/app'",
                "USER 'root'",
                r#"COPY --chown=1000:1000 ["a.txt","'/a.txt'"]"#,
                r#"CMD ["/bin/sh","-c","python -m http.server"]"#,
            ]
        );
        assert_eq!(
            plan.steps,
            [
                "base", "base", "base", "1", "2", "2", "2", "3", "4", "5", "6", "7", "finalize"
            ]
        );
        assert_eq!(plan.copies.len(), 2);
        assert_eq!(plan.ready.unwrap()[2], "test -f /tmp/ready");
        assert_eq!(plan.fresh_from, None);
    }

    #[test]
    fn the_plan_reads_back_as_written() {
        // The instructions go through sandboxd's own checks: values stay literal.
        let start = BuildStart {
            from_template: Some("base".into()),
            steps: vec![
                step("ENV", &["A", "it's $x \"q\" \\"]),
                step("COPY", &["a b.txt", "/dir with space/", "", ""]),
            ],
            ..Default::default()
        };
        let plan = plan(&start).unwrap();
        let files = BTreeMap::from([(
            "a b.txt".to_owned(),
            crate::template_build::FileBody::Bytes(b"x".to_vec()),
        )]);
        let build = crate::validate::build_of(
            crate::validate::BuildHead {
                name: "t".into(),
                ..Default::default()
            },
            plan.instructions.clone(),
            GivenFiles {
                contents: files,
                ..Default::default()
            },
            FileBounds::GIVEN,
        )
        .unwrap();
        let mut steps = crate::template_build::Steps::new(Default::default());
        let names = build.files.keys().cloned().collect();
        let mut actions = Vec::new();
        for instruction in &plan.instructions[1..] {
            actions.push(steps.next_action(instruction, &names).unwrap());
        }
        assert_eq!(
            steps.settings.env,
            [("A".to_owned(), "it's $x \"q\" \\".to_owned())]
        );
        let crate::template_build::Action::Copy { targets, owner, .. } = &actions[3] else {
            panic!("{actions:?}");
        };
        assert_eq!(targets[0].path, "/dir with space/a b.txt");
        assert_eq!(*owner, (1000, 1000));
    }

    #[test]
    fn force_runs_again_from_its_step() {
        let mut forced = step("RUN", &["b"]);
        forced.force = true;
        let start = BuildStart {
            from_template: Some("base".into()),
            steps: vec![step("RUN", &["a"]), forced, step("RUN", &["c"])],
            ..Default::default()
        };
        assert_eq!(plan(&start).unwrap().fresh_from, Some(5));
        let all = BuildStart {
            force: true,
            ..start
        };
        assert_eq!(plan(&all).unwrap().fresh_from, Some(2));
    }

    #[test]
    fn what_cannot_be_built_is_named() {
        for (start, wanted) in [
            (
                BuildStart {
                    from_image: Some("x".into()),
                    from_image_registry: Some(serde_json::json!({"type": "registry"})),
                    ..Default::default()
                },
                "pulls no image",
            ),
            (BuildStart::default(), "fromImage"),
            (
                BuildStart {
                    from_image: Some("x".into()),
                    steps: vec![step("COPY", &["a", "/a", "bob", ""])],
                    ..Default::default()
                },
                "steps.0",
            ),
            (
                BuildStart {
                    from_image: Some("x".into()),
                    steps: vec![step("ADD", &["a"])],
                    ..Default::default()
                },
                "ADD is not taken",
            ),
            (
                BuildStart {
                    from_image: Some("x".into()),
                    steps: vec![step("COPY", &["a", "/a", "", "9"])],
                    ..Default::default()
                },
                "octal",
            ),
        ] {
            let error = plan(&start).unwrap_err().to_string();
            assert!(error.contains(wanted), "{error} lacks {wanted}");
        }
    }

    fn tar_of(entries: &[(&str, &[u8], u32)], gzip: bool) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, content, mode) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(*mode);
            header.set_cksum();
            builder.append_data(&mut header, name, *content).unwrap();
        }
        let tar = builder.into_inner().unwrap();
        if !gzip {
            return tar;
        }
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &tar).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn archives_are_read_into_files_and_modes() {
        let mut given = GivenFiles::default();
        let archive = tar_of(
            &[("app/run.sh", b"#!/bin/sh", 0o755), ("a.txt", b"a", 0o644)],
            true,
        );
        read_archive(&archive, &mut given).unwrap();
        let plain = tar_of(&[("b.txt", b"b", 0o600)], false);
        read_archive(&plain, &mut given).unwrap();
        assert_eq!(given.contents.len(), 3);
        assert_eq!(
            given.contents["app/run.sh"],
            crate::template_build::FileBody::Bytes(b"#!/bin/sh".to_vec())
        );
        assert_eq!(
            given.modes,
            BTreeMap::from([("app/run.sh".into(), 0o755), ("b.txt".into(), 0o600)])
        );
    }

    fn link_archive(kind: tar::EntryType) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(0);
        builder.append_link(&mut header, "l", "a.txt").unwrap();
        builder.into_inner().unwrap()
    }

    #[test]
    fn symbolic_links_are_kept_hard_links_and_bombs_refused() {
        let mut given = GivenFiles::default();
        read_archive(&link_archive(tar::EntryType::Symlink), &mut given).unwrap();
        assert_eq!(given.links, BTreeMap::from([("l".into(), "a.txt".into())]));
        let error = read_archive(&link_archive(tar::EntryType::Link), &mut given).unwrap_err();
        assert!(error.contains("resolve_symlinks"), "{error}");
        // 65 MiB of zeros in one file, a few hundred KiB gzipped.
        let big = vec![0u8; 65 << 20];
        let bomb = tar_of(&[("z", &big, 0o644)], true);
        assert!(bomb.len() < 1 << 20);
        let error = read_archive(&bomb, &mut given).unwrap_err();
        assert!(error.contains("MiB"), "{error}");
        assert!(given.contents.is_empty());
    }

    #[test]
    fn a_status_names_e2b_s_steps() {
        let mut build = TemplateBuild {
            build_id: "b".into(),
            template_id: "t".into(),
            organization_id: "o".into(),
            project_id: "p".into(),
            name: "n".into(),
            version: 1,
            status: "error".into(),
            image: None,
            user: None,
            workdir: None,
            start: None,
            ready: None,
            cpu: None,
            memory_mb: None,
            isolation: None,
            error_step: Some(4),
            error_message: Some("RUN exited with code 1".into()),
            created_at: 0,
            finished_at: None,
        };
        let steps: Vec<String> = ["base", "base", "base", "1"].map(String::from).into();
        let line = LogLine {
            time: 0,
            step: 4,
            stream: "stdout".into(),
            line: "hi".into(),
        };
        let answer = status_answer("t", "b", Some(&build), &steps, &[line], |_| "T".into());
        assert_eq!(answer.status, "error");
        assert_eq!(answer.reason.unwrap().step.as_deref(), Some("1"));
        assert_eq!(answer.log_entries[0].step.as_deref(), Some("1"));
        build.status = "building".into();
        assert_eq!(
            status_answer("t", "b", Some(&build), &steps, &[], |_| "T".into()).status,
            "building"
        );
        assert_eq!(
            status_answer("t", "b", None, &[], &[], |_| "T".into()).status,
            "waiting"
        );
        // A build of sandboxd's own API: its instructions' numbers.
        assert_eq!(step_name(&[], 1), "base");
        assert_eq!(step_name(&[], 4), "3");
        assert_eq!(step_name(&steps, 9), "finalize");
    }

    #[test]
    fn names_carry_tags() {
        let request = TemplateRequest {
            name: Some("app:v1".into()),
            ..Default::default()
        };
        assert_eq!(
            name_and_tags(&request).unwrap(),
            ("app".into(), vec!["v1".to_owned()])
        );
        let plain = TemplateRequest {
            alias: Some("app".into()),
            ..Default::default()
        };
        assert_eq!(name_and_tags(&plain).unwrap().1, ["default"]);
    }
}
