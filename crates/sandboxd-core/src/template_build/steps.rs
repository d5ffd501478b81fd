//! A checked Dockerfile's instructions after `FROM`, one at a time, as the builder runs
//! them: `Steps::next_action` keeps the image's settings (variables, user, workdir,
//! labels, command) as each instruction changes them, and says what the step does to the
//! filesystem: run a command, copy files, make the workdir, or nothing. The same pass runs
//! once before the build on the base's settings unknown, so what cannot be done is a 400
//! before any container is made.

use std::collections::{BTreeMap, BTreeSet};

use super::copy::{CopyTarget, copy_targets};
use super::dockerfile::{Instruction, at};
use super::words::{is_name, words};
use crate::error::Invalid;

/// The longest word `$` substitution may make (64 KiB).
pub const MAX_WORD_BYTES: usize = 64 << 10;
/// The most bytes an image's variables, the build's arguments and the labels hold
/// together (256 KiB).
pub const MAX_SETTINGS_BYTES: usize = 256 << 10;
/// Labels under this prefix are sandboxd's own: a Dockerfile may not set them, and a
/// base's are not carried.
pub const RESERVED_LABELS: &str = "sandboxd.";

/// An image's settings, as the builder keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The variables, in order, as `NAME` and value.
    pub env: Vec<(String, String)>,
    /// `USER` as written (`""`: the engine's default, root).
    pub user: String,
    /// `WORKDIR` (`""`: `/`).
    pub workdir: String,
    pub labels: BTreeMap<String, String>,
    pub cmd: Option<Vec<String>>,
    pub entrypoint: Option<Vec<String>>,
}

impl Settings {
    fn set_env(&mut self, name: String, value: String) {
        match self.env.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.env.push((name, value)),
        }
    }

    /// The directory commands run in.
    pub fn cwd(&self) -> String {
        if self.workdir.is_empty() {
            "/".into()
        } else {
            self.workdir.clone()
        }
    }
}

/// What one step does to the filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing: only the settings changed.
    Settings,
    /// Run a command, as `user`, in `cwd`, with `env` (the image's variables and the
    /// build's arguments).
    Run {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        user: String,
        cwd: String,
    },
    /// Copy files given to the build, owned by `owner` (`uid`, `gid`), each with the
    /// mode `--chmod` gives, or else its own.
    Copy {
        targets: Vec<CopyTarget>,
        owner: (u64, u64),
        mode: Option<u32>,
    },
    /// Make the workdir (and its parents) if it is not there, what it makes owned by
    /// `user` (the `USER` then, as written; `""`: root).
    MakeDir { path: String, user: String },
}

/// The builder's state across the steps of one build.
#[derive(Debug, Clone)]
pub struct Steps {
    pub settings: Settings,
    /// The build's arguments declared so far (`ARG`), with their defaults.
    args: BTreeMap<String, String>,
}

impl Steps {
    /// Starts from the base image's settings.
    pub fn new(base: Settings) -> Self {
        Self {
            settings: base,
            args: BTreeMap::new(),
        }
    }

    /// The variables `$NAME` reads: the arguments, then the image's variables over them.
    fn vars(&self) -> BTreeMap<String, String> {
        let mut vars = self.args.clone();
        vars.extend(self.settings.env.iter().cloned());
        vars
    }

    fn words(&self, instruction: &Instruction, text: &str) -> Result<Vec<String>, Invalid> {
        let fail = |message: String| {
            at(
                instruction.line,
                format!("{}: {message}", instruction.keyword),
            )
        };
        let words = words(text, &self.vars(), MAX_WORD_BYTES).map_err(fail)?;
        Ok(words)
    }

    /// Refuses settings past their bound (the variables and labels an image keeps).
    fn check_size(&self, instruction: &Instruction) -> Result<(), Invalid> {
        let pairs = |map: &mut dyn Iterator<Item = (&String, &String)>| {
            map.map(|(k, v)| k.len() + v.len()).sum::<usize>()
        };
        let size = pairs(&mut self.settings.env.iter().map(|(k, v)| (k, v)))
            + pairs(&mut self.settings.labels.iter())
            + pairs(&mut self.args.iter());
        if size > MAX_SETTINGS_BYTES {
            return Err(at(
                instruction.line,
                format!(
                    "the variables, arguments and labels would hold {size} bytes; at most {MAX_SETTINGS_BYTES} are taken"
                ),
            ));
        }
        Ok(())
    }

    /// Applies one instruction after `FROM` and says what its step does.
    pub fn next_action(
        &mut self,
        instruction: &Instruction,
        files: &BTreeSet<String>,
    ) -> Result<Action, Invalid> {
        let action = self.apply(instruction, files)?;
        self.check_size(instruction)?;
        Ok(action)
    }

    fn apply(
        &mut self,
        instruction: &Instruction,
        files: &BTreeSet<String>,
    ) -> Result<Action, Invalid> {
        let line = instruction.line;
        let keyword = instruction.keyword.as_str();
        let args = instruction.args.as_str();
        match keyword {
            "RUN" => {
                let argv = match exec_form(args) {
                    Some(argv) if !argv.is_empty() => argv,
                    Some(_) => return Err(at(line, "RUN names no command")),
                    None => vec!["/bin/sh".into(), "-c".into(), args.to_owned()],
                };
                let mut env: Vec<(String, String)> = self
                    .args
                    .iter()
                    .filter(|(name, _)| !self.settings.env.iter().any(|(n, _)| n == *name))
                    .map(|(n, v)| (n.clone(), v.clone()))
                    .collect();
                env.extend(self.settings.env.iter().cloned());
                Ok(Action::Run {
                    argv,
                    env,
                    user: self.settings.user.clone(),
                    cwd: self.settings.cwd(),
                })
            }
            "ENV" | "LABEL" => {
                let pairs = self.pairs(instruction)?;
                for (name, value) in pairs {
                    if keyword == "ENV" {
                        self.settings.set_env(name, value);
                    } else {
                        self.settings.labels.insert(name, value);
                    }
                }
                Ok(Action::Settings)
            }
            "ARG" => {
                for word in self.words(instruction, args)? {
                    let (name, value) = match word.split_once('=') {
                        Some((name, value)) => (name.to_owned(), value.to_owned()),
                        None => (word.clone(), String::new()),
                    };
                    if !is_name(&name) {
                        return Err(at(line, format!("ARG {name}: not a variable's name")));
                    }
                    self.args.insert(name, value);
                }
                Ok(Action::Settings)
            }
            "WORKDIR" => {
                let path = self.words(instruction, args)?.join(" ");
                if path.is_empty() {
                    return Err(at(line, "WORKDIR names no directory"));
                }
                let path = absolute(&self.settings.cwd(), &path);
                self.settings.workdir = path.clone();
                Ok(Action::MakeDir {
                    path,
                    user: self.settings.user.clone(),
                })
            }
            "USER" => {
                let user = self.words(instruction, args)?.join(" ");
                if user.is_empty() || user.contains(char::is_whitespace) {
                    return Err(at(line, "USER names one user (`name`, `uid` or `uid:gid`)"));
                }
                self.settings.user = user;
                Ok(Action::Settings)
            }
            "CMD" | "ENTRYPOINT" => {
                let argv = match exec_form(args) {
                    Some(argv) => argv,
                    None => vec!["/bin/sh".into(), "-c".into(), args.to_owned()],
                };
                if keyword == "CMD" {
                    self.settings.cmd = Some(argv);
                } else {
                    self.settings.entrypoint = Some(argv);
                    self.settings.cmd = None;
                }
                Ok(Action::Settings)
            }
            "COPY" | "ADD" => self.copy(instruction, files),
            _ => Err(at(line, format!("{keyword} is not taken here"))),
        }
    }

    /// `NAME=value` pairs (or the old `NAME value` form) of `ENV` and `LABEL`.
    fn pairs(&self, instruction: &Instruction) -> Result<Vec<(String, String)>, Invalid> {
        let line = instruction.line;
        let keyword = &instruction.keyword;
        let raw = instruction.args.trim();
        let (first_raw, rest_raw) = raw.split_once(char::is_whitespace).unwrap_or((raw, ""));
        if first_raw.is_empty() {
            return Err(at(line, format!("{keyword} names nothing")));
        }
        let pairs: Vec<(String, String)> = if !first_raw.contains('=') {
            // The old form, `NAME value…`: the name is the first word as written.
            let name = self.words(instruction, first_raw)?.join("");
            let value = self.words(instruction, rest_raw.trim())?.join(" ");
            vec![(name, value)]
        } else {
            let words = self.words(instruction, raw)?;
            words
                .iter()
                .map(|word| match word.split_once('=') {
                    Some((name, value)) => Ok((name.to_owned(), value.to_owned())),
                    None => Err(at(
                        line,
                        format!("{keyword} takes NAME=value pairs, and `{word}` is not one"),
                    )),
                })
                .collect::<Result<_, _>>()?
        };
        for (name, _) in &pairs {
            if keyword == "ENV" && !is_name(name) {
                return Err(at(line, format!("ENV {name}: not a variable's name")));
            }
            if name.is_empty() {
                return Err(at(line, format!("{keyword} names an empty key")));
            }
            if keyword == "LABEL" && name.starts_with(RESERVED_LABELS) {
                return Err(at(
                    line,
                    format!("LABEL {name}: labels under `{RESERVED_LABELS}` are sandboxd's own"),
                ));
            }
        }
        Ok(pairs)
    }

    fn copy(
        &mut self,
        instruction: &Instruction,
        files: &BTreeSet<String>,
    ) -> Result<Action, Invalid> {
        let line = instruction.line;
        let keyword = &instruction.keyword;
        let mut rest = instruction.args.as_str();
        let mut owner = (0, 0);
        let mut mode = None;
        while let Some(flagged) = rest.strip_prefix("--") {
            let (flag, after) = flagged
                .split_once(char::is_whitespace)
                .unwrap_or((flagged, ""));
            if let Some(value) = flag.strip_prefix("chown=") {
                owner = numeric_owner(&self.words(instruction, value)?.join(""))
                    .ok_or_else(|| {
                        at(
                            line,
                            format!("{keyword} --chown takes numbers (`uid` or `uid:gid`), not `{value}`"),
                        )
                    })?;
            }
            if let Some(value) = flag.strip_prefix("chmod=") {
                mode = Some(super::dockerfile::octal_mode(value).ok_or_else(|| {
                    at(
                        line,
                        format!("{keyword} --chmod takes an octal mode (`0755`), not `{value}`"),
                    )
                })?);
            }
            rest = after.trim_start();
        }
        let mut sources = exec_form(rest).unwrap_or_else(|| {
            rest.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        });
        let Some(dest) = sources.pop().filter(|_| !sources.is_empty()) else {
            return Err(at(
                line,
                format!("{keyword} names its sources and then where they go"),
            ));
        };
        if keyword == "ADD"
            && let Some(archive) = sources.iter().find(|s| is_archive(s))
        {
            return Err(at(
                line,
                format!(
                    "ADD {archive}: archives are not unpacked here; COPY it and unpack it in a RUN"
                ),
            ));
        }
        let dest = self.words(instruction, &dest)?.join(" ");
        let into_dir = dest.ends_with('/')
            || dest == "."
            || dest == ".."
            || dest.ends_with("/.")
            || sources.len() > 1;
        let dest = absolute(&self.settings.cwd(), &dest);
        let mut targets = Vec::new();
        for source in &sources {
            targets.extend(
                copy_targets(source, &dest, into_dir, files)
                    .map_err(|message| at(line, format!("{keyword} {source}: {message}")))?,
            );
        }
        Ok(Action::Copy {
            targets,
            owner,
            mode,
        })
    }
}

/// A JSON array of strings, the exec form.
fn exec_form(args: &str) -> Option<Vec<String>> {
    args.starts_with('[')
        .then(|| serde_json::from_str::<Vec<String>>(args).ok())
        .flatten()
}

fn is_archive(name: &str) -> bool {
    [
        ".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst",
    ]
    .iter()
    .any(|suffix| name.ends_with(suffix))
}

/// `uid` or `uid:gid` as numbers (`uid` alone: the group of the same number).
pub fn numeric_owner(value: &str) -> Option<(u64, u64)> {
    let (uid, gid) = value.split_once(':').unwrap_or((value, value));
    Some((uid.parse().ok()?, gid.parse().ok()?))
}

/// `path` made absolute against `cwd`, with `.` and `..` parts resolved (never above `/`).
pub fn absolute(cwd: &str, path: &str) -> String {
    if path.starts_with('/') {
        crate::paths::normalized(path)
    } else {
        crate::paths::normalized(&format!("{cwd}/{path}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::parse;
    use super::*;

    fn run(dockerfile: &str, files: &[&str]) -> (Vec<Action>, Settings) {
        let files: BTreeSet<String> = files.iter().map(|f| (*f).to_owned()).collect();
        let base = Settings {
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            ..Settings::default()
        };
        let mut steps = Steps::new(base);
        let actions = parse(dockerfile)
            .unwrap()
            .iter()
            .skip(1)
            .map(|i| steps.next_action(i, &files).unwrap())
            .collect();
        (actions, steps.settings)
    }

    #[test]
    fn settings_follow_the_instructions() {
        let (actions, settings) = run(
            "FROM base\nARG V=1\nENV PATH=/opt/bin:$PATH APP=\"my app\"\nENV OLD form value\n\
             WORKDIR /srv\nWORKDIR app\nUSER 1000:1000\nLABEL a=b\nENTRYPOINT [\"/bin/app\"]\nCMD [\"--x\"]\n\
             RUN echo $V\n",
            &[],
        );
        assert_eq!(
            settings.env,
            vec![
                ("PATH".to_owned(), "/opt/bin:/usr/bin:/bin".to_owned()),
                ("APP".into(), "my app".into()),
                ("OLD".into(), "form value".into()),
            ]
        );
        assert_eq!(settings.workdir, "/srv/app");
        assert_eq!(settings.user, "1000:1000");
        assert_eq!(settings.labels.get("a").map(String::as_str), Some("b"));
        assert_eq!(settings.entrypoint, Some(vec!["/bin/app".to_owned()]));
        assert_eq!(settings.cmd, Some(vec!["--x".to_owned()]));
        assert_eq!(
            actions[3],
            Action::MakeDir {
                path: "/srv".into(),
                user: String::new(),
            }
        );
        let Action::Run {
            argv,
            env,
            user,
            cwd,
        } = &actions[9]
        else {
            panic!("{:?}", actions[9]);
        };
        assert_eq!(argv, &["/bin/sh", "-c", "echo $V"]);
        assert_eq!(env[0], ("V".to_owned(), "1".to_owned()));
        assert_eq!((user.as_str(), cwd.as_str()), ("1000:1000", "/srv/app"));
    }

    #[test]
    fn copies_land_where_the_builder_puts_them() {
        let files = ["app/main.py", "app/lib/x.py", "req.txt", "a.sh", "b.sh"];
        let (actions, _) = run(
            "FROM base\nWORKDIR /w\nCOPY --chown=1000:1001 req.txt .\nCOPY app /srv/\nCOPY --chmod=0750 *.sh bin/\nCOPY req.txt /etc/req\n",
            &files,
        );
        let target = |index: usize| match &actions[index] {
            Action::Copy {
                targets,
                owner,
                mode,
            } => (
                targets
                    .iter()
                    .map(|t| (t.file.as_str(), t.path.as_str()))
                    .collect::<Vec<_>>(),
                *owner,
                *mode,
            ),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            target(1),
            (vec![("req.txt", "/w/req.txt")], (1000, 1001), None)
        );
        assert_eq!(
            target(2).0,
            vec![
                ("app/lib/x.py", "/srv/lib/x.py"),
                ("app/main.py", "/srv/main.py")
            ]
        );
        assert_eq!(
            target(3).0,
            vec![("a.sh", "/w/bin/a.sh"), ("b.sh", "/w/bin/b.sh")]
        );
        assert_eq!(target(3).2, Some(0o750));
        assert_eq!(target(4).0, vec![("req.txt", "/etc/req")]);
    }

    #[test]
    fn what_cannot_be_done_is_named_with_its_line() {
        let files: BTreeSet<String> = ["x.tar.gz".to_owned()].into();
        for (text, wanted) in [
            (
                "COPY --chown=app x.tar.gz /x",
                "line 2: COPY --chown takes numbers",
            ),
            ("ADD x.tar.gz /x", "archives are not unpacked"),
            ("COPY --chmod=0999 x.tar.gz /x", "octal mode"),
            ("ENV 1A=b", "not a variable's name"),
            ("ENV A=\"open", "is not closed"),
            ("USER", "names one user"),
        ] {
            let instructions = parse(&format!("FROM b\n{text}\n")).unwrap();
            let error = Steps::new(Settings::default())
                .next_action(&instructions[1], &files)
                .unwrap_err()
                .to_string();
            assert!(error.contains(wanted), "{text}: {error}");
        }
    }

    #[test]
    fn paths_are_made_absolute() {
        assert_eq!(absolute("/", "a/../b"), "/b");
        assert_eq!(absolute("/w", "../../x"), "/x");
        assert_eq!(absolute("/w", "/abs/"), "/abs");
    }
}
