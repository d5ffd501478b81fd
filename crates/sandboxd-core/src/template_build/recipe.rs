//! A Dockerfile's instructions checked into a `Recipe`: only the instructions whose
//! effect is understood, one stage built on one base, files copied only from those the
//! build was given, nothing fetched; and what the built template records of it (its base
//! as written, its start command, its user and workdir).

use std::collections::BTreeSet;

use super::dockerfile::{Instruction, at};
use crate::error::{Invalid, Issues};

/// The instructions a template's Dockerfile may use.
const TAKEN: [&str; 11] = [
    "FROM",
    "RUN",
    "COPY",
    "ADD",
    "ENV",
    "ARG",
    "WORKDIR",
    "USER",
    "CMD",
    "ENTRYPOINT",
    "LABEL",
];

/// A checked Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// What `FROM` names, as written (an allowed image, a template or a snapshot: the
    /// service resolves it).
    pub from: String,
    /// The line of `FROM`.
    pub from_line: usize,
    /// The instructions the builder runs as steps (`FROM` and every one after it, and
    /// each `ARG` before it).
    pub steps: usize,
    /// The command run in a sandbox after it is made from the template, from the last
    /// `ENTRYPOINT` and `CMD` as the engine combines them.
    pub start: Option<StartCommand>,
    /// The last `USER`, as written.
    pub user: Option<String>,
    /// The last `WORKDIR`, as written.
    pub workdir: Option<String>,
    /// The files the build's `COPY` and `ADD` read, as given.
    pub copied: BTreeSet<String>,
}

/// A start command as an argument vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartCommand {
    pub argv: Vec<String>,
}

/// A source of `COPY` or `ADD`, as it was matched against the files given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopySource {
    /// One file.
    File(String),
    /// Every file under a directory (`.` for all of them).
    Directory(String),
    /// The files a pattern (`*`, `?`) names.
    Pattern(String),
}

/// Checks `instructions` against the names of the files the build was given.
pub fn check(instructions: &[Instruction], files: &BTreeSet<String>) -> Result<Recipe, Invalid> {
    if instructions.len() > super::MAX_INSTRUCTIONS {
        return Err(Invalid::one(
            "dockerfile",
            format!(
                "has {} instructions; at most {} are taken",
                instructions.len(),
                super::MAX_INSTRUCTIONS
            ),
        ));
    }
    let mut work = Work {
        names_bytes: files.iter().map(String::len).sum(),
        sources: 0,
        spent: 0,
    };
    let mut from: Option<(String, usize)> = None;
    let mut args_before = 0;
    let mut after = 0;
    let (mut entrypoint, mut cmd) = (None, None);
    let (mut user, mut workdir) = (None, None);
    let mut copied = BTreeSet::new();
    for instruction in instructions {
        let line = instruction.line;
        let keyword = instruction.keyword.as_str();
        if !TAKEN.contains(&keyword) {
            return Err(at(
                line,
                format!(
                    "{keyword} is not taken (a template's Dockerfile may use {})",
                    TAKEN.join(", ")
                ),
            ));
        }
        if from.is_none() {
            match keyword {
                "ARG" => {
                    args_before += 1;
                    continue;
                }
                "FROM" => {
                    from = Some((base_of(instruction)?, line));
                    continue;
                }
                _ => return Err(at(line, format!("{keyword} comes before FROM"))),
            }
        }
        after += 1;
        match keyword {
            "FROM" => {
                return Err(at(line, "a second FROM: a template is built in one stage"));
            }
            "RUN" => {
                if instruction.args.starts_with("--") {
                    return Err(at(
                        line,
                        "RUN takes no flags (--mount, --network, --security)",
                    ));
                }
                // In the exec form, `<<` is the command's own (its shell's).
                if exec_form(&instruction.args).is_none() {
                    refuse_heredoc(instruction)?;
                }
            }
            "COPY" | "ADD" => copied.extend(copy_sources(instruction, files, &mut work)?),
            "USER" => user = Some(instruction.args.clone()),
            "WORKDIR" => workdir = Some(instruction.args.clone()),
            "ENTRYPOINT" => {
                entrypoint = Some(command_of(instruction)?);
                // An ENTRYPOINT resets the CMD set before it.
                cmd = None;
            }
            "CMD" => cmd = Some(command_of(instruction)?),
            _ => {}
        }
    }
    let Some((from, from_line)) = from else {
        return Err(Invalid::one("dockerfile", "has no FROM"));
    };
    Ok(Recipe {
        from,
        from_line,
        steps: args_before + 1 + after,
        start: start_command(entrypoint, cmd),
        user,
        workdir,
        copied,
    })
}

/// A command as written: the exec form's vector, or the shell form (`shell: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    argv: Vec<String>,
    shell: bool,
}

fn command_of(instruction: &Instruction) -> Result<Written, Invalid> {
    if let Some(argv) = exec_form(&instruction.args) {
        return Ok(Written { argv, shell: false });
    }
    if instruction.args.is_empty() {
        return Err(at(
            instruction.line,
            format!("{} names no command", instruction.keyword),
        ));
    }
    Ok(Written {
        argv: vec!["/bin/sh".into(), "-c".into(), instruction.args.clone()],
        shell: true,
    })
}

/// The engine's rule: an ENTRYPOINT in exec form is followed by CMD's arguments; one in
/// shell form takes none; without an ENTRYPOINT, CMD is the command.
fn start_command(entrypoint: Option<Written>, cmd: Option<Written>) -> Option<StartCommand> {
    let argv = match (entrypoint, cmd) {
        (Some(entrypoint), _) if entrypoint.shell => entrypoint.argv,
        (Some(entrypoint), Some(cmd)) => [entrypoint.argv, cmd.argv].concat(),
        (Some(entrypoint), None) => entrypoint.argv,
        (None, Some(cmd)) => cmd.argv,
        (None, None) => return None,
    };
    (!argv.is_empty()).then_some(StartCommand { argv })
}

/// A JSON array of strings, the exec form.
fn exec_form(args: &str) -> Option<Vec<String>> {
    args.starts_with('[')
        .then(|| serde_json::from_str::<Vec<String>>(args).ok())
        .flatten()
}

fn base_of(instruction: &Instruction) -> Result<String, Invalid> {
    let line = instruction.line;
    let words: Vec<&str> = instruction.args.split_whitespace().collect();
    match words.as_slice() {
        [first, ..] if first.starts_with("--") => Err(at(line, "FROM takes no flags (--platform)")),
        [base] | [base, _, _] if !base.contains('$') => {
            if let [_, as_word, _] = words.as_slice()
                && !as_word.eq_ignore_ascii_case("AS")
            {
                return Err(at(line, "FROM is `FROM <base>` or `FROM <base> AS <name>`"));
            }
            Ok((*base).to_owned())
        }
        [base, ..] if base.contains('$') => Err(at(
            line,
            "FROM names its base as written: no `$` substitution",
        )),
        _ => Err(at(line, "FROM is `FROM <base>` or `FROM <base> AS <name>`")),
    }
}

fn refuse_heredoc(instruction: &Instruction) -> Result<(), Invalid> {
    let heredoc = instruction.args.split_whitespace().any(|word| {
        word.strip_prefix("<<")
            .and_then(|rest| rest.trim_start_matches('-').chars().next())
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '"' || c == '\'' || c == '_')
    });
    if heredoc {
        return Err(at(
            instruction.line,
            format!(
                "{} takes no heredoc (`<<EOF`): give the file in files",
                instruction.keyword
            ),
        ));
    }
    Ok(())
}

/// The files a `COPY` or `ADD` reads, each matched against the files given.
/// What matching a Dockerfile's sources against the files given may cost: every source
/// reads the list of files, and a pattern costs its length per byte of their names.
struct Work {
    names_bytes: usize,
    sources: usize,
    spent: usize,
}

/// The most sources (of all `COPY` and `ADD` together) a Dockerfile may name.
pub const MAX_SOURCES: usize = 1000;
/// The most work matching the patterns may take (pattern bytes × name bytes).
const MAX_PATTERN_WORK: usize = 200_000_000;

fn copy_sources(
    instruction: &Instruction,
    files: &BTreeSet<String>,
    work: &mut Work,
) -> Result<Vec<String>, Invalid> {
    let line = instruction.line;
    let keyword = &instruction.keyword;
    refuse_heredoc(instruction)?;
    let mut rest = instruction.args.as_str();
    while let Some(flagged) = rest.strip_prefix("--") {
        let (flag, after) = flagged
            .split_once(char::is_whitespace)
            .unwrap_or((flagged, ""));
        let name = flag.split('=').next().unwrap_or(flag);
        match name {
            "chown" if !flag.contains('$') => {}
            "chmod" if super::dockerfile::octal_mode(&flag[name.len()..]).is_some() => {}
            "chmod" => {
                return Err(at(
                    line,
                    format!("{keyword} --chmod takes an octal mode (`0755`), not `{flag}`"),
                ));
            }
            "from" => {
                return Err(at(
                    line,
                    format!(
                        "{keyword} --from reads another image or stage: give the files in files"
                    ),
                ));
            }
            _ => {
                return Err(at(
                    line,
                    format!("{keyword} takes --chown and --chmod only, not --{name}"),
                ));
            }
        }
        rest = after.trim_start();
    }
    let words =
        exec_form(rest).unwrap_or_else(|| rest.split_whitespace().map(str::to_owned).collect());
    let Some((_, sources)) = words.split_last().filter(|(_, s)| !s.is_empty()) else {
        return Err(at(
            line,
            format!("{keyword} names its sources and then where they go"),
        ));
    };
    let mut read = Vec::new();
    for source in sources {
        if source.contains("://") || source.starts_with("git@") {
            return Err(at(
                line,
                format!("{keyword} of a URL fetches from the network: give the file in files"),
            ));
        }
        if source.contains('$') {
            return Err(at(
                line,
                format!("{keyword} names its sources as written: no `$` substitution"),
            ));
        }
        work.sources += 1;
        if work.sources > MAX_SOURCES {
            return Err(at(
                line,
                format!("the Dockerfile names more than {MAX_SOURCES} sources to copy"),
            ));
        }
        if source.contains(['*', '?']) {
            work.spent = work
                .spent
                .saturating_add(source.len().saturating_mul(work.names_bytes));
            if work.spent > MAX_PATTERN_WORK {
                return Err(at(
                    line,
                    format!(
                        "{keyword} {source}: the patterns are too many or too long for this many files; name directories instead"
                    ),
                ));
            }
        }
        let matched = match_source(source, files)
            .map_err(|message| at(line, format!("{keyword} {source}: {message}")))?;
        read.extend(matched);
    }
    Ok(read)
}

/// The files `source` names among `files`, or why it names none.
fn match_source(source: &str, files: &BTreeSet<String>) -> Result<Vec<String>, String> {
    let mut name = source;
    while let Some(rest) = name.strip_prefix("./") {
        name = rest;
    }
    let name = name.trim_end_matches('/');
    if name.starts_with('/') {
        return Err("a source is a path among the files given, not an absolute path".into());
    }
    if name.split('/').any(|part| part == "..") {
        return Err("a source may not leave the files given (`..`)".into());
    }
    let found: Vec<String> = if name.is_empty() || name == "." {
        files.iter().cloned().collect()
    } else if name.contains(['*', '?', '[']) {
        if name.contains('[') {
            return Err("character classes (`[...]`) are not taken; use `*` or `?`".into());
        }
        files
            .iter()
            .filter(|file| pattern_names(name, file))
            .cloned()
            .collect()
    } else if files.contains(name) {
        vec![name.to_owned()]
    } else {
        let directory = format!("{name}/");
        files
            .iter()
            .filter(|file| file.starts_with(&directory))
            .cloned()
            .collect()
    };
    if found.is_empty() {
        return Err("names none of the files given".into());
    }
    Ok(found)
}

/// Whether `pattern` names `file`, or a directory `file` is under (the builder's match:
/// `*` and `?` within one part of the path).
pub(super) fn pattern_names(pattern: &str, file: &str) -> bool {
    let patterns: Vec<&str> = pattern.split('/').collect();
    let parts: Vec<&str> = file.split('/').collect();
    parts.len() >= patterns.len()
        && patterns
            .iter()
            .zip(&parts)
            .all(|(pattern, part)| part_matches(pattern.as_bytes(), part.as_bytes()))
}

/// `*` and `?` matched in one pass with one point to go back to (no recursion: a
/// pattern is the user's, as long as the Dockerfile, and costs at most its length times
/// the part's).
fn part_matches(pattern: &[u8], part: &[u8]) -> bool {
    let (mut p, mut c) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while c < part.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, c));
                p += 1;
            }
            Some(&wanted) if wanted == b'?' || wanted == part[c] => {
                p += 1;
                c += 1;
            }
            _ => match star {
                Some((at, from)) => {
                    p = at + 1;
                    c = from + 1;
                    star = Some((at, from + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Checks the names of the files a build is given: relative paths without `..`, empty
/// parts or control characters (the first `MAX_NAMES_TOLD` bad ones told).
pub fn check_file_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), Invalid> {
    let mut issues = Issues::default();
    let mut bad = 0;
    for name in names {
        if bad == MAX_NAMES_TOLD {
            break;
        }
        bad += 1;
        let path = format!("files.{name}");
        if name.is_empty() || name.len() > 1024 {
            issues.push(path, "a file's name is 1 to 1024 bytes");
        } else if name.starts_with('/') {
            issues.push(path, "a file's name is a relative path");
        } else if name.chars().any(char::is_control) || name.contains('\\') {
            issues.push(
                path,
                "a file's name holds no control character or backslash",
            );
        } else if name
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        {
            issues.push(path, "a file's name has no empty, `.` or `..` part");
        } else if name.split('/').any(|part| part.len() > 255) {
            issues.push(path, "a part of a file's name is at most 255 bytes");
        } else {
            bad -= 1;
        }
    }
    issues.finish(())
}

/// The most bad names one answer tells.
const MAX_NAMES_TOLD: usize = 20;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::parse;
    use super::*;

    fn files(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn checked(text: &str, given: &[&str]) -> Result<Recipe, String> {
        check(&parse(text).map_err(|e| e.to_string())?, &files(given)).map_err(|e| e.to_string())
    }

    #[test]
    fn a_whole_recipe_is_read() {
        let recipe = checked(
            "ARG V=1\nFROM python AS base\nRUN pip install pandas\nCOPY app/ /app/\nCOPY ./req.txt *.py /src/\nENV A=1\nWORKDIR /app\nUSER 1000\nLABEL x=y\nENTRYPOINT [\"python\"]\nCMD [\"main.py\"]\n",
            &["app/main.py", "app/lib/x.py", "req.txt", "run.py", "other.txt"],
        )
        .unwrap();
        assert_eq!(recipe.from, "python");
        assert_eq!(recipe.from_line, 2);
        assert_eq!(recipe.steps, 11);
        assert_eq!(recipe.user.as_deref(), Some("1000"));
        assert_eq!(recipe.workdir.as_deref(), Some("/app"));
        assert_eq!(
            recipe.start.unwrap().argv,
            vec!["python".to_owned(), "main.py".to_owned()]
        );
        assert_eq!(
            recipe.copied,
            files(&["app/main.py", "app/lib/x.py", "req.txt", "run.py"])
        );
    }

    #[test]
    fn the_start_command_follows_the_engines_rules() {
        let start = |text: &str| checked(&format!("FROM b\n{text}"), &[]).unwrap().start;
        assert_eq!(
            start("CMD echo hi").unwrap().argv,
            ["/bin/sh", "-c", "echo hi"]
        );
        assert_eq!(
            start("ENTRYPOINT top -b\nCMD [\"x\"]").unwrap().argv,
            ["/bin/sh", "-c", "top -b"]
        );
        // An ENTRYPOINT drops the CMD written before it.
        assert_eq!(
            start("CMD [\"a\"]\nENTRYPOINT [\"e\"]").unwrap().argv,
            ["e"]
        );
        assert_eq!(start("RUN true"), None);
    }

    #[test]
    fn what_is_not_taken_is_refused_with_its_line() {
        for (text, says) in [
            ("FROM b\nEXPOSE 80\n", "line 2: EXPOSE is not taken"),
            ("FROM b\nONBUILD RUN x\n", "ONBUILD is not taken"),
            ("RUN x\nFROM b\n", "RUN comes before FROM"),
            ("ARG X\n", "has no FROM"),
            ("FROM b\nFROM c\n", "a second FROM"),
            ("FROM $BASE\n", "no `$` substitution"),
            ("FROM --platform=linux/arm64 b\n", "no flags"),
            ("FROM b c\n", "FROM <base>"),
            (
                "FROM b\nRUN --mount=type=secret,id=x cat /run/secrets/x\n",
                "RUN takes no flags",
            ),
            ("FROM b\nRUN <<EOF\n", "heredoc"),
            ("FROM b\nADD https://example.com/x /x\n", "ADD of a URL"),
            ("FROM b\nADD git@github.com:a/b /x\n", "ADD of a URL"),
            ("FROM b\nCOPY --from=alpine /etc/passwd /x\n", "--from"),
            ("FROM b\nCOPY --link a /a\n", "--chown and --chmod only"),
            ("FROM b\nCOPY --chmod=u+x a /a\n", "octal mode"),
            ("FROM b\nCOPY $SRC /x\n", "no `$` substitution"),
            ("FROM b\nCOPY ../etc/passwd /x\n", "`..`"),
            ("FROM b\nCOPY /etc/passwd /x\n", "absolute"),
            ("FROM b\nCOPY missing /x\n", "names none of the files given"),
            ("FROM b\nCOPY *.rs /x\n", "names none"),
            ("FROM b\nCOPY [ab].py /x\n", "character classes"),
            ("FROM b\nCOPY a\n", "names its sources and then where"),
            ("FROM b\nCMD\n", "names no command"),
        ] {
            let error = checked(text, &["a"]).unwrap_err();
            assert!(error.contains(says), "{text:?}: {error}");
        }
    }

    #[test]
    fn sources_are_files_directories_and_patterns_of_those_given() {
        let given = files(&["a.py", "b.py", "src/x/y.c", "src/z.c", "README"]);
        let names = |source: &str| match_source(source, &given);
        assert_eq!(names("a.py").unwrap(), ["a.py"]);
        assert_eq!(names("./src/").unwrap(), ["src/x/y.c", "src/z.c"]);
        assert_eq!(names(".").unwrap().len(), 5);
        assert_eq!(names("*.py").unwrap(), ["a.py", "b.py"]);
        assert_eq!(names("src/*").unwrap(), ["src/x/y.c", "src/z.c"]);
        assert_eq!(names("?.py").unwrap(), ["a.py", "b.py"]);
        assert!(names("sr").is_err());
        assert!(part_matches(b"a*b?d*", b"axxbcdyy"));
        assert!(!part_matches(b"a*b?d", b"axxbcdyy"));
        // A pattern as long as a Dockerfile allows costs no stack and little time.
        let long = "*a".repeat(100_000);
        assert!(!part_matches(long.as_bytes(), "a".repeat(1024).as_bytes()));
        assert!(part_matches("?".repeat(3).as_bytes(), b"abc"));
        assert!(names("*.c").is_err());
    }

    #[test]
    fn file_names_are_relative_and_plain() {
        assert!(check_file_names(["a.txt", "dir/b.bin", ".hidden"]).is_ok());
        for bad in ["/etc/passwd", "../x", "a//b", "a/./b", "", "a\nb", "a\\b"] {
            assert!(check_file_names([bad]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn instructions_are_read_in_any_case_and_json_copies_too() {
        let recipe = checked(
            "from b\ncopy [\"with space.txt\", \"/x/\"]\ncmd [\"sleep\", \"1\"]\n",
            &["with space.txt"],
        )
        .unwrap();
        assert_eq!(recipe.copied, files(&["with space.txt"]));
        assert_eq!(recipe.start.unwrap().argv, ["sleep", "1"]);
    }
}
