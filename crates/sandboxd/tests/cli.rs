//! The client commands through the real binary against a real server and engine: the
//! sandbox lifecycle, tables and `--json`, `cp` of a tree and of files both ways, byte
//! for byte, `exec` streaming with the command's exit code, exit codes a script can
//! test, and the profile `login` keeps.
//!
//! Also: a tree holding a 1 GiB file copied both ways with the server's peak memory read
//! from `/proc`, the progress line under `script(1)`, `exec -i`, snapshots and forks,
//! volumes, and changes with their tar.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{KEY, RunningServer, sandboxd};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

fn with_server(server: &RunningServer) -> [(&str, &str); 2] {
    [("SANDBOXD_URL", server.url.as_str()), ("SANDBOXD_KEY", KEY)]
}

#[tokio::test]
async fn the_sandbox_lifecycle_from_a_terminal() {
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);

    let templates = run(&["templates"]);
    assert_eq!(templates.code, 0, "{}", templates.stderr);
    assert!(templates.stdout.starts_with("NAME"), "{}", templates.stdout);
    assert!(templates.stdout.contains("python"));

    let created = run(&[
        "create",
        "--template",
        "base",
        "--name",
        "from-cli",
        "--timeout",
        "20m",
    ]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    let id = created.stdout.trim().to_owned();
    assert!(
        !id.is_empty() && !id.contains(' '),
        "only the id: {}",
        created.stdout
    );

    let listed = run(&["ls"]);
    assert!(
        listed.stdout.contains(&id) && listed.stdout.contains("from-cli"),
        "{}",
        listed.stdout
    );
    let shown = run(&["show", &id, "--json"]);
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(shown["sandboxId"], id.as_str());
    assert_eq!(shown["status"], "running");
    assert_eq!(shown["timeoutMs"], 1_200_000);

    let renamed = run(&["rename", &id, "renamed-in-cli"]);
    assert_eq!(renamed.code, 0, "{}", renamed.stderr);
    assert!(run(&["ls"]).stdout.contains("renamed-in-cli"));
    let bad = run(&["rename", &id, ""]);
    assert_eq!(bad.code, 1, "refused: {}", bad.stderr);
    assert!(bad.stderr.contains("name"), "{}", bad.stderr);

    let extended = run(&["timeout", &id, "2h"]);
    assert_eq!(extended.code, 0, "{}", extended.stderr);
    assert!(
        extended.stdout.starts_with("expires at "),
        "{}",
        extended.stdout
    );
    let files = run(&["files", &id, "/"]);
    assert_eq!(files.code, 0, "{}", files.stderr);
    assert!(files.stdout.contains("etc"), "{}", files.stdout);

    // What it uses now, and the readings kept (one taken now before the first pass).
    let stats = run(&["stats", &id]);
    assert_eq!(stats.code, 0, "{}", stats.stderr);
    assert!(
        stats.stdout.contains("memory") && stats.stdout.contains(" of "),
        "{}",
        stats.stdout
    );
    let history = run(&["stats", &id, "--history", "--since", "10m", "--json"]);
    assert_eq!(history.code, 0, "{}", history.stderr);
    let history: Value = serde_json::from_str(&history.stdout).unwrap();
    assert_eq!(history["intervalMs"], 5000);
    assert!(
        !history["readings"].as_array().unwrap().is_empty(),
        "{history}"
    );
    let table = run(&["stats", &id, "--history"]);
    assert!(table.stdout.starts_with("TIME"), "{}", table.stdout);
    let lone = run(&["stats", &id, "--since", "10m"]);
    assert_eq!(lone.code, 2, "--since needs --history: {}", lone.stderr);

    let killed = run(&["kill", &id]);
    assert_eq!(killed.code, 0, "{}", killed.stderr);
    assert!(
        !run(&["ls"]).stdout.contains(&id),
        "a killed one is not listed"
    );
    assert!(run(&["ls", "--all"]).stdout.contains(&id));
    assert_eq!(run(&["rm", &id]).code, 0);
    let gone = run(&["show", &id]);
    assert_eq!(gone.code, 4, "not found: {}", gone.stderr);
    assert!(gone.stderr.contains("not found"), "{}", gone.stderr);
}

#[tokio::test]
async fn snapshots_and_forks_from_a_terminal() {
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    let id = run(&["create", "-t", "base"]).stdout.trim().to_owned();
    let wrote = run(&["exec", &id, "--", "echo kept > /home/user/f"]);
    assert_eq!(wrote.code, 0, "{}", wrote.stderr);

    let taken = run(&["snapshot", "create", &id, "--name", "cli"]);
    assert_eq!(taken.code, 0, "{}", taken.stderr);
    let snap = taken.stdout.trim().to_owned();
    assert!(
        !snap.is_empty() && !snap.contains(' '),
        "only the id: {}",
        taken.stdout
    );
    let listed = run(&["snapshot", "ls"]);
    assert!(listed.stdout.starts_with("ID"), "{}", listed.stdout);
    assert!(listed.stdout.contains(&snap) && listed.stdout.contains("cli"));
    let shown = run(&["snapshot", "show", &snap]);
    assert!(shown.stdout.contains("workdir") && shown.stdout.contains("/home/user"));

    let made = run(&["create", "--snapshot", &snap]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let made = made.stdout.trim().to_owned();
    let read = run(&["exec", &made, "--", "cat /home/user/f"]);
    assert_eq!(read.stdout, "kept\n");
    // What changed since the snapshot.
    assert_eq!(run(&["changes", &made]).stdout, "no changes\n");
    run(&[
        "exec",
        &made,
        "--",
        "echo more >> /home/user/f && echo new > /home/user/g",
    ]);
    let changed = run(&["changes", &made]);
    assert_eq!(changed.code, 0, "{}", changed.stderr);
    let lines: Vec<&str> = changed.stdout.lines().collect();
    assert!(lines[0].starts_with("KIND"), "{}", changed.stdout);
    assert!(
        lines[1].starts_with("changed") && lines[1].ends_with("/home/user/f"),
        "{}",
        changed.stdout
    );
    assert!(
        lines[2].starts_with("added") && lines[2].ends_with("/home/user/g"),
        "{}",
        changed.stdout
    );
    let tar = home.path().join("work.tar");
    let written = run(&["changes", &made, "--tar", tar.to_str().unwrap()]);
    assert_eq!(written.code, 0, "{}", written.stderr);
    let mut archive = tar::Archive::new(std::fs::File::open(&tar).unwrap());
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["home/user/f", "home/user/g"]);

    let forked = run(&["fork", &id, "-n", "2"]);
    assert_eq!(forked.code, 0, "{}", forked.stderr);
    let forks: Vec<&str> = forked.stdout.lines().collect();
    assert_eq!(forks.len(), 2, "{}", forked.stdout);
    for fork in &forks {
        assert_eq!(
            run(&["exec", fork, "--", "cat /home/user/f"]).stdout,
            "kept\n"
        );
    }

    // What was done in the source, a line each: made, the command, two snapshots.
    let mut activity = String::new();
    for _ in 0..100 {
        activity = run(&["activity", &id]).stdout;
        if activity.matches(" snapshot ").count() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let lines: Vec<&str> = activity.lines().collect();
    assert_eq!(lines.len(), 4, "{activity}");
    assert!(
        lines[0].contains(" lifecycle create   from base"),
        "{activity}"
    );
    assert!(
        lines[1].contains(" command   stream   $ echo kept > /home/user/f -> exit 0,"),
        "{activity}"
    );
    assert!(!lines[1].contains("FAILED"), "{activity}");
    let json = run(&["activity", &id, "--kinds", "command", "--json"]);
    let entry: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(entry["command"]["exitCode"], 0, "{}", json.stdout);
    let newest = run(&["activity", &id, "--latest", "1"]).stdout;
    assert_eq!(newest.lines().count(), 1, "{newest}");
    assert!(newest.contains(" snapshot "), "{newest}");

    // Refused while a sandbox made from it runs: exit code 1, the reason said.
    let refused = run(&["snapshot", "rm", &snap]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("kill them first"),
        "{}",
        refused.stderr
    );
    let mut all = vec!["kill", made.as_str()];
    all.extend(&forks);
    assert_eq!(run(&all).code, 0);
    let removed = run(&["snapshot", "rm", &snap]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(removed.stdout, format!("{snap} removed\n"));
    assert_eq!(run(&["snapshot", "show", &snap]).code, 4);
}

#[tokio::test]
async fn volumes_from_a_terminal() {
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    let made = run(&["volume", "create", "cache", "--size-mb", "64"]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let vol = made.stdout.trim().to_owned();
    assert!(
        !vol.is_empty() && !vol.contains(' '),
        "only the id: {}",
        made.stdout
    );

    // Mounted by name, then by id and read-only.
    let writer = run(&["create", "--volume", "cache:/data"]);
    assert_eq!(writer.code, 0, "{}", writer.stderr);
    let writer = writer.stdout.trim().to_owned();
    assert_eq!(run(&["exec", &writer, "--", "echo kept > /data/f"]).code, 0);
    let listed = run(&["volume", "ls"]);
    assert!(listed.stdout.starts_with("ID"), "{}", listed.stdout);
    assert!(
        listed.stdout.contains("cache") && listed.stdout.contains(&writer),
        "{}",
        listed.stdout
    );
    let refused = run(&["volume", "rm", "cache"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("kill it first"),
        "{}",
        refused.stderr
    );
    assert_eq!(run(&["kill", &writer]).code, 0);

    let reader = run(&["create", "--volume", &format!("{vol}:/in:ro")]);
    assert_eq!(reader.code, 0, "{}", reader.stderr);
    let reader = reader.stdout.trim().to_owned();
    assert_eq!(run(&["exec", &reader, "--", "cat /in/f"]).stdout, "kept\n");
    assert_ne!(run(&["exec", &reader, "--", "touch /in/g"]).code, 0);
    let shown = run(&["volume", "show", "cache"]);
    assert!(shown.stdout.contains("64 MiB"), "{}", shown.stdout);
    let bad = run(&["create", "--volume", "cache"]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(bad.stderr.contains("VOLUME:PATH"), "{}", bad.stderr);
    assert_eq!(run(&["kill", &reader]).code, 0);
    let removed = run(&["volume", "rm", "cache"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(removed.stdout, "cache removed\n");
    assert_eq!(run(&["volume", "show", vol.as_str()]).code, 1);
}

/// Removes the images template builds made (the tests that build run one at a time).
fn remove_build_images() {
    let _ = Command::new("bash")
        .args([
            "-c",
            "for r in sandboxd-templates sandboxd-build-cache; do docker images --format '{{.Repository}}:{{.Tag}}' --filter reference=\"$r:*\" | xargs -r docker rmi >/dev/null 2>&1; done",
        ])
        .status();
}

struct BuildImages;
impl Drop for BuildImages {
    fn drop(&mut self) {
        remove_build_images();
    }
}

#[tokio::test]
async fn templates_from_a_terminal() {
    let _images = BuildImages;
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    std::fs::create_dir_all(home.path().join("app/bin")).unwrap();
    // An executable script stays one, as `docker build` keeps it.
    let tool = home.path().join("app/bin/tool.sh");
    std::fs::write(&tool, "#!/bin/sh\necho tool-ran\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        home.path().join("app/Dockerfile"),
        "FROM base\nCOPY bin/ /opt/bin/\nRUN echo built-by-run && /opt/bin/tool.sh > /opt/out\n",
    )
    .unwrap();
    let built = run(&[
        "template",
        "build",
        "-f",
        "app/Dockerfile",
        "--name",
        "tool",
    ]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    // The log went to standard error as the build ran: its steps and their output.
    assert!(
        built.stderr.contains("Step 1/3 : FROM base"),
        "{}",
        built.stderr
    );
    assert!(built.stderr.contains("  built-by-run"), "{}", built.stderr);
    assert!(built.stdout.contains("ready version"), "{}", built.stdout);

    let sandbox = run(&["create", "--template", "tool"]);
    assert_eq!(sandbox.code, 0, "{}", sandbox.stderr);
    let sandbox = sandbox.stdout.trim().to_owned();
    assert_eq!(
        run(&["exec", &sandbox, "--", "cat /opt/out"]).stdout,
        "tool-ran\n"
    );
    let all = run(&["templates"]);
    assert!(
        all.stdout
            .lines()
            .any(|l| l.starts_with("tool ") && l.contains(" built ")),
        "{}",
        all.stdout
    );
    let listed = run(&["template", "ls"]);
    assert!(
        listed.stdout.starts_with("ID") && listed.stdout.contains("tool"),
        "{}",
        listed.stdout
    );
    let busy = run(&["template", "rm", "tool"]);
    assert_eq!(busy.code, 1, "{}", busy.stderr);
    assert!(busy.stderr.contains("kill them first"), "{}", busy.stderr);

    // A failing step fails the command, naming the step.
    std::fs::write(home.path().join("Broken"), "FROM base\nRUN exit 7\n").unwrap();
    let broken = run(&["template", "build", "-f", "Broken", "--name", "broken"]);
    assert_eq!(broken.code, 1, "{}", broken.stderr);
    assert!(
        broken.stderr.contains("failed at step 2"),
        "{}",
        broken.stderr
    );
    assert!(
        broken.stderr.contains("exited with code 7"),
        "{}",
        broken.stderr
    );

    // A directory with a symbolic link goes as a context streamed as a tar, the link
    // kept as one.
    std::fs::create_dir_all(home.path().join("linked")).unwrap();
    std::fs::write(home.path().join("linked/real.txt"), "real\n").unwrap();
    std::os::unix::fs::symlink("real.txt", home.path().join("linked/alias")).unwrap();
    std::fs::write(
        home.path().join("linked/Dockerfile"),
        "FROM base\nCOPY . /l/\nRUN cat /l/alias && readlink /l/alias\n",
    )
    .unwrap();
    let linked = run(&[
        "template",
        "build",
        "-f",
        "linked/Dockerfile",
        "--name",
        "linked",
    ]);
    assert_eq!(linked.code, 0, "{}", linked.stderr);
    assert!(
        linked.stderr.contains("  real\n  real.txt\n"),
        "{}",
        linked.stderr
    );
    assert_eq!(run(&["template", "rm", "linked"]).code, 0);

    assert_eq!(run(&["kill", &sandbox]).code, 0);
    let removed = run(&["template", "rm", "tool"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(removed.stdout, "tool removed\n");
    assert_eq!(run(&["template", "show", "tool"]).code, 4);
}

/// The size of the big file of the copied tree.
const BIG: usize = 1 << 30;

/// A tree of 1,000 small files in nested directories and one of 1 GiB (written a MiB at
/// a time); the SHA-256 of each file by its path.
fn make_tree(root: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for i in 0..1000 {
        let path = format!("src/m{}/f{i}.txt", i % 20);
        let content = format!("file {i}\n");
        std::fs::create_dir_all(root.join(&path).parent().unwrap()).unwrap();
        std::fs::write(root.join(&path), &content).unwrap();
        files.insert(path, hex(&Sha256::digest(content.as_bytes())));
    }
    std::fs::create_dir_all(root.join("data")).unwrap();
    let mut big =
        std::io::BufWriter::new(std::fs::File::create(root.join("data/big.bin")).unwrap());
    let mut hasher = Sha256::new();
    let mut state = 88172645463325252u64;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..BIG / block.len() {
        for word in block.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        hasher.update(&block);
        std::io::Write::write_all(&mut big, &block).unwrap();
    }
    std::io::Write::flush(&mut big).unwrap();
    files.insert("data/big.bin".into(), hex(&hasher.finalize()));
    files
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn file_digest(path: &Path) -> String {
    let mut file = std::fs::File::open(path).unwrap();
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 20];
    loop {
        let read = std::io::Read::read(&mut file, &mut block).unwrap();
        if read == 0 {
            return hex(&hasher.finalize());
        }
        hasher.update(&block[..read]);
    }
}

fn read_tree(root: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap().display().to_string();
                files.insert(relative, file_digest(&path));
            }
        }
    }
    files
}

/// A line of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn cp_moves_a_tree_and_files_both_ways_byte_for_byte() {
    let server = RunningServer::start().await;
    let id = server.create().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    let tree = tokio::task::spawn_blocking({
        let root = home.path().join("project");
        move || make_tree(&root)
    })
    .await
    .unwrap();
    let pid = server.pid();
    let (rss_before, peak_before) = (memory_kib(pid, "VmRSS"), memory_kib(pid, "VmHWM"));
    let served_before = server.served().await;

    let up = run(&["cp", "project", &format!("{id}:/home/user/project")]);
    assert_eq!(up.code, 0, "{}", up.stderr);
    let down = run(&["cp", &format!("{id}:/home/user/project"), "copy"]);
    assert_eq!(down.code, 0, "{}", down.stderr);
    let back = read_tree(&home.path().join("copy"));
    assert_eq!(back.len(), tree.len());
    assert!(back == tree, "the tree came back changed");
    // Both ways through the sandbox's agent, none through the engine.
    let served_after = server.served().await;
    assert_eq!(
        served_after.1, served_before.1,
        "{served_before:?} → {served_after:?}"
    );
    assert!(
        served_after.0 >= served_before.0 + 2,
        "{served_before:?} → {served_after:?}"
    );
    // The server streams: 2 GiB went through it, its memory stayed where it was.
    let peak_after = memory_kib(pid, "VmHWM");
    eprintln!(
        "server memory: RSS {rss_before} KiB before, peak {peak_before} KiB before and \
         {peak_after} KiB after moving the tree both ways"
    );
    assert!(
        peak_after < peak_before.max(rss_before) + 128 * 1024,
        "the server's peak memory grew from {peak_before} to {peak_after} KiB"
    );
    std::fs::remove_dir_all(home.path().join("copy")).unwrap();

    // One file, into a directory (its name kept) and out to a new name.
    // Under a terminal (script(1) gives it one) a progress line is drawn and redrawn.
    let line = format!(
        "'{}' cp project/data/big.bin {id}:/home/user/in/",
        env!("CARGO_BIN_EXE_sandboxd")
    );
    let up = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("HOME", home.path())
        .envs(env)
        .current_dir(home.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&up.stdout);
    assert!(up.status.success(), "{shown}");
    assert!(
        shown.contains("\r\x1b[2K") && shown.contains("1.0 GiB / 1.0 GiB (100%)"),
        "a progress line on the terminal: {:?}",
        shown
            .get(shown.len().saturating_sub(300)..)
            .unwrap_or(&shown)
    );
    let down = run(&[
        "cp",
        &format!("{id}:/home/user/in/big.bin"),
        "big.copy",
        "--json",
    ]);
    assert_eq!(down.code, 0, "{}", down.stderr);
    let report: Value = serde_json::from_str(&down.stdout).unwrap();
    assert_eq!(report["bytes"], BIG);
    assert_eq!(
        file_digest(&home.path().join("big.copy")),
        tree["data/big.bin"]
    );

    // Missing on either side: a clear error, nothing written.
    let missing = run(&["cp", &format!("{id}:/home/user/nope"), "nope"]);
    assert_eq!(missing.code, 4, "{}", missing.stderr);
    assert!(!home.path().join("nope").exists());
    let missing = run(&["cp", "nope", &format!("{id}:/home/user/x")]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(missing.stderr.contains("nope"), "{}", missing.stderr);
}

/// A tree made inside a sandbox is hostile: set-id files and directories come down
/// without their set-id bits, and a copy into an existing directory never writes over
/// what is there.
#[tokio::test]
async fn cp_down_drops_set_id_bits_and_never_writes_over_what_is_there() {
    use std::os::unix::fs::PermissionsExt as _;
    let server = RunningServer::start().await;
    let id = server.create().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    let made = server
        .post(
            KEY,
            "sandbox.exec",
            serde_json::json!({"sandboxId": id, "cmd":
                "mkdir -p out/sub && cp /bin/sh out/evil && chmod 4755 out/evil && \
                 chmod 2777 out/sub && chmod 1777 out && echo ok"}),
        )
        .await;
    assert_eq!(made.0, 200, "{:?}", made.1);
    assert_eq!(made.1["stdout"], "ok\n", "{:?}", made.1);

    std::fs::create_dir(home.path().join("dl")).unwrap();
    let down = run(&["cp", &format!("{id}:/home/user/out"), "dl/"]);
    assert_eq!(down.code, 0, "{}", down.stderr);
    let mode = |p: &str| {
        std::fs::symlink_metadata(home.path().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("dl/out/evil"), 0o755);
    assert_eq!(mode("dl/out/sub"), 0o777);
    assert_eq!(mode("dl/out"), 0o777);
    let leftovers: Vec<_> = std::fs::read_dir(home.path().join("dl"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["out"], "no staging directory is left behind");

    // Again into the same place: refused, what is there kept.
    std::fs::write(home.path().join("dl/out/evil"), "mine").unwrap();
    let again = run(&["cp", &format!("{id}:/home/user/out"), "dl/"]);
    assert_ne!(again.code, 0, "{}", again.stdout);
    assert!(again.stderr.contains("exists"), "{}", again.stderr);
    assert_eq!(
        std::fs::read_to_string(home.path().join("dl/out/evil")).unwrap(),
        "mine"
    );
}

#[tokio::test]
async fn errors_say_what_to_do_and_exit_codes_tell_them_apart() {
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();

    let wrong = sandboxd(
        home.path(),
        &[
            ("SANDBOXD_URL", &server.url),
            ("SANDBOXD_KEY", "sbx_wrong_key_0123456789abcdefghij"),
        ],
        &["ls"],
    );
    assert_eq!(wrong.code, 3, "{}", wrong.stderr);
    assert!(wrong.stderr.contains("refused the key"), "{}", wrong.stderr);
    assert!(wrong.stderr.contains("sandboxd login"), "{}", wrong.stderr);

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let down = sandboxd(
        home.path(),
        &[("SANDBOXD_URL", &nowhere), ("SANDBOXD_KEY", KEY)],
        &["ls"],
    );
    assert_eq!(down.code, 5, "{}", down.stderr);
    assert!(
        down.stderr.contains("no sandboxd answers"),
        "{}",
        down.stderr
    );

    // A redirect is not followed: the key never goes to the address it names.
    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let location = format!(
        "http://{}/api/sandbox.templates",
        elsewhere.local_addr().unwrap()
    );
    let redirecting = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let redirect_url = format!("http://{}", redirecting.local_addr().unwrap());
    let answering = std::thread::spawn(move || {
        let (mut conn, _) = redirecting.accept().unwrap();
        let mut request = [0u8; 4096];
        let _ = std::io::Read::read(&mut conn, &mut request);
        let answer =
            format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n");
        std::io::Write::write_all(&mut conn, answer.as_bytes()).unwrap();
    });
    let redirected = sandboxd(
        home.path(),
        &[("SANDBOXD_URL", &redirect_url), ("SANDBOXD_KEY", KEY)],
        &["templates"],
    );
    answering.join().unwrap();
    assert_eq!(redirected.code, 5, "{}", redirected.stderr);
    assert!(
        redirected.stderr.contains("redirects"),
        "{}",
        redirected.stderr
    );
    assert!(
        elsewhere.accept().is_err(),
        "nothing reached the address of the redirect"
    );

    // Another server named with --url gets neither the profile's nor the local key.
    let remote = sandboxd(
        home.path(),
        &[("SANDBOXD_URL", "https://sandboxd.invalid")],
        &["ls"],
    );
    assert_eq!(remote.code, 2, "{}", remote.stderr);
    assert!(
        remote
            .stderr
            .contains("no key for https://sandboxd.invalid"),
        "{}",
        remote.stderr
    );

    let usage = sandboxd(home.path(), &[], &["timeout", "x", "soon"]);
    assert_eq!(usage.code, 2, "{}", usage.stderr);

    // No key anywhere: told where one comes from.
    let keyless = sandboxd(home.path(), &[("SANDBOXD_URL", &server.url)], &["ls"]);
    assert_eq!(keyless.code, 2, "{}", keyless.stderr);
    assert!(
        keyless.stderr.contains("sandboxd login"),
        "{}",
        keyless.stderr
    );

    // A login that fails keeps nothing; one that works is used with no flags.
    let failed = sandboxd(
        home.path(),
        &[],
        &[
            "login",
            "--url",
            &server.url,
            "--key",
            "sbx_wrong_key_0123456789abcdefghij",
        ],
    );
    assert_eq!(failed.code, 3, "{}", failed.stderr);
    let profile = home.path().join(".config/sandboxd/profile.json");
    assert!(!profile.exists());
    let login = sandboxd(
        home.path(),
        &[],
        &["login", "--url", &server.url, "--key", KEY],
    );
    assert_eq!(login.code, 0, "{}", login.stderr);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&profile).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let listed = sandboxd(home.path(), &[], &["templates", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let templates: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert!(templates.as_array().unwrap().len() >= 3);
}

#[tokio::test]
async fn exec_streams_output_as_it_comes_and_exits_with_the_commands_code() {
    let server = RunningServer::start().await;
    let id = server.create().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);

    let ran = run(&[
        "exec",
        &id,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 7",
    ]);
    assert_eq!(ran.code, 7, "{}", ran.stderr);
    assert_eq!(ran.stdout, "out\n");
    assert!(ran.stderr.contains("err"), "{}", ran.stderr);

    let ran = run(&[
        "exec",
        &id,
        "-e",
        "GREETING=hi there",
        "--cwd",
        "/tmp",
        "--json",
        "--",
        "echo \"$GREETING from $(pwd)\"",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let outcome: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(outcome["stdout"], "hi there from /tmp\n");

    let ran = run(&["exec", &id, "--timeout", "1s", "--", "sleep 30"]);
    assert_eq!(ran.code, 124, "timed out: {}", ran.stderr);

    // With -i the command reads this side's input, every byte of it.
    let input: Vec<u8> = (0..3 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args(["exec", "-i", &id, "--", "wc -c; exit 3"])
        .env("HOME", home.path())
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        (3 << 20).to_string()
    );

    // The first line is here while the command still runs.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args(["exec", &id, "--", "echo first; sleep 4; echo second"])
        .env("HOME", home.path())
        .envs(env)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    let reader = std::thread::spawn(move || {
        std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
        (first, started.elapsed())
    });
    let (first, after) = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    assert_eq!(first, "first\n");
    assert!(
        after < std::time::Duration::from_secs(3),
        "streamed, not at the end: {after:?}"
    );
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_background_process_is_listed_and_its_output_followed() {
    let server = RunningServer::start().await;
    let id = server.create().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);

    let started = run(&[
        "exec",
        "-d",
        &id,
        "--",
        "for i in 1 2 3; do echo line $i; sleep 0.3; done",
    ]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let process = started.stdout.trim().to_owned();
    let listed = run(&["ps", &id]);
    assert!(listed.stdout.contains(&process), "{}", listed.stdout);
    let followed = run(&["logs", "-f", &id, &process]);
    assert_eq!(followed.code, 0, "{}", followed.stderr);
    assert_eq!(followed.stdout, "line 1\nline 2\nline 3\n");
    let listed = run(&["ps", &id, "--json"]);
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(listed[0]["status"], "exited");
    assert_eq!(listed[0]["exitCode"], 0);
}

#[tokio::test]
async fn an_allowlist_sandbox_is_made_and_its_list_replaced_from_a_terminal() {
    let server = RunningServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    let created = run(&[
        "create",
        "--allow",
        "PyPI.org",
        "--allow",
        "*.pythonhosted.org",
        "--json",
    ]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    let created: Value = serde_json::from_str(&created.stdout).unwrap();
    assert_eq!(
        created["networkMode"], "allowlist",
        "--allow implies the mode"
    );
    let id = created["sandboxId"].as_str().unwrap().to_owned();
    let listed = run(&["egress", "ls", &id]);
    assert_eq!(
        listed.stdout, "pypi.org\n*.pythonhosted.org\n",
        "{}",
        listed.stderr
    );
    let set = run(&["egress", "set", &id, "api.example.com:8443"]);
    assert_eq!(set.stdout, "api.example.com:8443\n", "{}", set.stderr);
    let refused = run(&["egress", "set", &id, "10.0.0.1"]);
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("[0]"),
        "the bad entry is named: {}",
        refused.stderr
    );
    assert_eq!(run(&["egress", "ls", &id]).stdout, "api.example.com:8443\n");

    // A refused connection shows in the log (written in the background).
    let asked = run(&["exec", &id, "--", "curl -s http://blocked.example/ || true"]);
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    let mut log = String::new();
    for _ in 0..50 {
        log = run(&["egress", "log", &id]).stdout;
        if !log.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        log.contains("refused blocked.example:80: not in the sandbox's egress list"),
        "{log}"
    );
    let json = run(&["egress", "log", &id, "--json"]);
    let entry: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(entry["decision"], "refused", "one JSON object a line");

    // A request, listed; the key that asked cannot decide it.
    let asked = run(&[
        "egress",
        "request",
        &id,
        "pypi.org",
        "--reason",
        "pip install",
    ]);
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert!(asked.stdout.contains(" pending "), "{}", asked.stdout);
    assert!(
        asked.stdout.trim_end().ends_with("pypi.org (pip install)"),
        "{}",
        asked.stdout
    );
    let request_id = asked.stdout.split_whitespace().next().unwrap().to_owned();
    let listed = run(&["egress", "requests"]);
    assert!(listed.stdout.starts_with(&request_id), "{}", listed.stdout);
    let own = run(&["egress", "approve", &request_id]);
    assert_ne!(own.code, 0);
    assert!(own.stderr.contains("another key"), "{}", own.stderr);
}

#[tokio::test]
async fn a_port_is_exposed_listed_unexposed_and_forwarded_from_a_terminal() {
    use std::io::BufRead as _;

    let server = RunningServer::start().await;
    let id = server.create().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    let started = run(&[
        "exec",
        "-d",
        &id,
        "--",
        "mkdir -p /tmp/www && echo from the sandbox > /tmp/www/index.html && \
         exec python3 -m http.server 8000 --bind 127.0.0.1 -d /tmp/www",
    ]);
    assert_eq!(started.code, 0, "{}", started.stderr);

    let exposed = run(&["port", "expose", &id, "8000", "--ttl", "10m"]);
    assert_eq!(exposed.code, 0, "{}", exposed.stderr);
    let url = exposed.stdout.trim().to_owned();
    assert!(url.contains("sandboxd_link="), "only the URL: {url}");
    let http = reqwest::Client::new();
    let mut page = String::new();
    for _ in 0..100 {
        let answer = http.get(&url).send().await.unwrap();
        if answer.status() == 200 {
            page = answer.text().await.unwrap();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        page, "from the sandbox\n",
        "the link opens the app without a key"
    );
    let listed = run(&["port", "ls", &id]);
    assert!(listed.stdout.starts_with("PORT"), "{}", listed.stdout);
    assert!(
        listed.stdout.contains("8000") && listed.stdout.contains("link"),
        "{}",
        listed.stdout
    );
    let removed = run(&["port", "rm", &id, "8000"]);
    assert_eq!(
        removed.stdout, "port 8000 unexposed\n",
        "{}",
        removed.stderr
    );
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401);

    // A local port reaching the sandbox's: any free one, two connections in turn.
    let mut forwarding = std::process::Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args(["port-forward", &id, "8000:0"])
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(forwarding.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let local = first
        .strip_prefix("Forwarding from ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    for _ in 0..2 {
        let page = http
            .get(format!("http://{local}/index.html"))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        assert_eq!(page.text().await.unwrap(), "from the sandbox\n");
    }
    let _ = forwarding.kill();
    let _ = forwarding.wait();

    let missing = run(&["port-forward", "no-such-sandbox", "8000"]);
    assert_eq!(missing.code, 4, "{}", missing.stderr);
}

#[test]
fn every_command_has_help_with_an_example() {
    let home = tempfile::tempdir().unwrap();
    let commands: &[&[&str]] = &[
        &["serve"],
        &["shell"],
        &["mcp"],
        &["login"],
        &["create"],
        &["ls"],
        &["exec"],
        &["ps"],
        &["logs"],
        &["show"],
        &["stats"],
        &["watch"],
        &["timeout"],
        &["rename"],
        &["kill"],
        &["rm"],
        &["templates"],
        &["files"],
        &["keys"],
        &["keys", "ls"],
        &["keys", "create"],
        &["keys", "revoke"],
        &["members"],
        &["members", "ls"],
        &["members", "add"],
        &["members", "update"],
        &["members", "rm"],
        &["cp"],
        &["port"],
        &["port", "expose"],
        &["port", "ls"],
        &["port", "rm"],
        &["port-forward"],
        &["doctor"],
        &["reap"],
        &["completions"],
    ];
    for command in commands {
        let help = sandboxd(home.path(), &[], &[&command[..], &["--help"]].concat());
        assert_eq!(help.code, 0, "{command:?}: {}", help.stderr);
        assert!(
            help.stdout.contains("Example"),
            "{command:?} has no example"
        );
    }
}

#[test]
fn completions_are_printed_for_each_shell() {
    let home = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let printed = sandboxd(home.path(), &[], &["completions", shell]);
        assert_eq!(printed.code, 0, "{shell}: {}", printed.stderr);
        assert!(printed.stdout.contains("sandboxd"), "{shell}");
        assert!(
            printed.stdout.contains("cp"),
            "{shell}: the client commands are there"
        );
    }
    let bad = sandboxd(home.path(), &[], &["completions", "tcsh"]);
    assert_eq!(bad.code, 2);
}

/// `sandboxd watch`: a line per change as it is made, until interrupted; a path that is
/// not a directory is refused (exit 1).
#[tokio::test]
async fn watch_prints_each_change_as_it_is_made() {
    let server = RunningServer::start().await;
    let id = server.create().await;
    let home = tempfile::tempdir().unwrap();
    let env = with_server(&server);
    let run = |args: &[&str]| sandboxd(home.path(), &env, args);
    assert_eq!(run(&["exec", &id, "--", "mkdir -p /tmp/w"]).code, 0);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args(["watch", "-r", &id, "/tmp/w"])
        .env("HOME", home.path())
        .envs(env)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stdout) {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let first = seen
        .recv_timeout(std::time::Duration::from_secs(20))
        .unwrap();
    assert_eq!(first, "watching /tmp/w");
    assert_eq!(
        run(&["exec", &id, "--", "echo x > /tmp/w/made.txt"]).code,
        0
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let line = seen
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            .expect("the change, in time");
        if line.starts_with("create") && line.ends_with("/tmp/w/made.txt") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let refused = run(&["watch", &id, "/etc/passwd"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("not a directory"),
        "{}",
        refused.stderr
    );
}
