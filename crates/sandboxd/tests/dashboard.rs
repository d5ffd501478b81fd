//! The web dashboard in a real browser (headless Chromium) against the real server and
//! engine: sign in (a wrong key first), create a sandbox through the form (a bad value
//! first), see it running in the list, run a command in the console, see the CPU chart
//! move while a command burns CPU, compute in the terminal, see the background process,
//! expose a port and open its preview through the signed link (the app's own script
//! running), upload a file and download it back, extend its timeout, kill it and delete it; then
//! the audit log lists those actions and filters them; on the members and keys page, a
//! key made works until it is revoked, and a member added, given a key and made an
//! administrator loses that key when removed. Each page is saved as a screenshot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::browser::Browser;
use common::{KEY, RunningServer};
use sha2::Digest as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_drives_a_sandbox_through_the_dashboard() {
    // Previews on hosts of their own: *.localhost is loopback to browsers.
    let server =
        RunningServer::start_logged_with(&[("SANDBOXD_PREVIEW_DOMAIN", "localhost")]).await;
    let browser = Browser::start().await;
    let page = &browser.client;
    let started = std::time::Instant::now();
    page.goto(&format!("{}/", server.url)).await.unwrap();
    browser.element("#key").await;
    let loaded = started.elapsed();
    eprintln!("the sign-in form was usable {loaded:?} after navigation began");
    // A guard against a page that hangs, not a measure of its speed: the browser's
    // first navigation, started beside the suite's other tests on two cores, took over
    // 5 s once.
    assert!(loaded.as_secs() < 30, "the sign-in form took {loaded:?}");
    browser.screenshot("sign-in").await;

    // A wrong key is refused with a message a person understands.
    browser
        .enter("#key", "sbx_not_a_key_of_this_server_0000000000")
        .await;
    browser.text_in("#key-error", "not valid").await;
    browser.screenshot("sign-in-refused").await;
    browser.fill("#key", "").await;
    browser.enter("#key", KEY).await;

    // Projects, then the environment's (empty) list.
    let environment = browser.element("a[data-environment]").await;
    browser.screenshot("projects").await;
    // The key is nowhere the page's scripts can read it.
    let stored: serde_json::Value = page
        .execute(
            "return [document.cookie, JSON.stringify(localStorage), JSON.stringify(sessionStorage)]",
            vec![],
        )
        .await
        .unwrap();
    assert!(!stored.to_string().contains(KEY), "{stored}");
    environment.click().await.unwrap();
    browser.text_in("main [role=status]", "No sandboxes").await;
    browser.click("a.button[href$='/new']").await;

    // The form shows the server's validation message next to the field.
    let name = browser.element("#f-name").await;
    name.send_keys("from-the-browser").await.unwrap();
    browser
        .element("#f-template")
        .await
        .select_by_value("base")
        .await
        .unwrap();
    browser.fill("#f-cpu", "1000").await;
    browser.click("form button[type=submit]").await;
    // Any message is words: it holds a space.
    browser.text_in("[data-error-for=cpu]", " ").await;
    browser.screenshot("create-invalid").await;
    browser.fill("#f-cpu", "1").await;
    browser.click("form button[type=submit]").await;

    // The details page, then the list with the sandbox running.
    browser.element("[data-facts] [data-status=running]").await;
    let sandbox_url = page.current_url().await.unwrap().to_string();
    browser
        .text_in("[data-fact=Image]", "sandboxd-local/debian")
        .await;
    browser.click("a[href^='#/env/']").await;
    browser.text_in("tbody tr", "from-the-browser").await;
    browser.text_in("tbody tr [data-status]", "running").await;
    browser.screenshot("sandboxes").await;

    // The console streams a command's output over the exec WebSocket.
    page.goto(&sandbox_url).await.unwrap();
    browser
        .element("#console-input + button:not([disabled])")
        .await;
    browser.enter("#console-input", "echo hello").await;
    browser.text_in("#console-output", "[exit 0]").await;
    let output = browser.text_in("#console-output", "hello").await;
    assert!(output.contains("$ echo hello\nhello\n"), "{output:?}");
    browser.screenshot("sandbox").await;

    // The usage charts move while a command burns CPU.
    let sandbox_id = sandbox_url.rsplit('/').next().unwrap().to_owned();
    let (status, burner) = server
        .post(
            KEY,
            "sandbox.processStart",
            serde_json::json!({"sandboxId": sandbox_id, "cmd": "while :; do :; done"}),
        )
        .await;
    assert_eq!(status, 200, "{burner}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let figure = browser.element("[data-usage=CPU]").await;
        let value: f64 = figure
            .attr("data-value")
            .await
            .unwrap()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        if value > 50.0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the CPU chart stayed at {value}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    browser.screenshot("usage").await;
    // Opened again once the server kept readings, the charts start from them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, kept) = server
            .get(KEY, &format!("sandbox.metrics?sandboxId={sandbox_id}"))
            .await;
        assert_eq!(status, 200, "{kept}");
        if kept["readings"].as_array().map_or(0, Vec::len) >= 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{kept}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    page.refresh().await.unwrap();
    let kept: usize = browser
        .element("[data-kept]")
        .await
        .attr("data-kept")
        .await
        .unwrap()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(kept >= 2, "{kept} readings drawn from the server's");

    // A real terminal on the PTY WebSocket.
    browser.click("#open-terminal").await;
    browser.text_in("section [role=status]", "Connected").await;
    let keys = browser.element("#terminal textarea").await;
    keys.send_keys("echo $((6*7))\n").await.unwrap();
    // The screen's text, as the page keeps it for screen readers.
    browser
        .text_in("#terminal .xterm-accessibility-tree", "42")
        .await;
    browser
        .client
        .execute(
            "document.getElementById('terminal').scrollIntoView()",
            vec![],
        )
        .await
        .unwrap();
    browser.screenshot("terminal").await;

    // The burner is listed among the background processes.
    browser
        .text_in("[data-process] code", "while :; do :; done")
        .await;

    // A port exposed from the ports panel opens in the browser through its signed link,
    // on a host of its own: the page's own script (a request the link's cookie must
    // carry) runs, and the link's token is gone from the address.
    let app = "mkdir -p /tmp/www && cd /tmp/www && \
        printf '<!doctype html><h1 id=title>served</h1><script src=app.js></script>' > index.html && \
        printf 'document.getElementById(\"title\").textContent = \"script ran\";' > app.js && \
        exec python3 -m http.server 8000 --bind 127.0.0.1";
    let (status, started) = server
        .post(
            KEY,
            "sandbox.processStart",
            serde_json::json!({"sandboxId": sandbox_id, "cmd": app}),
        )
        .await;
    assert_eq!(status, 200, "{started}");
    browser.fill("#expose input[name=port]", "8000").await;
    browser.click("#expose button[type=submit]").await;
    let link = browser
        .element("[data-port='8000'] a.open-preview")
        .await
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert!(link.contains("sandboxd_link="), "{link}");
    browser.text_in("[data-port='8000']", "signed link").await;
    browser.screenshot("ports").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        page.goto(&link).await.unwrap();
        if let Ok(title) = page.find(fantoccini::Locator::Id("title")).await
            && title.text().await.unwrap_or_default() == "script ran"
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the preview did not run its script: {}\n{}",
            page.source().await.unwrap_or_default(),
            server
                .log()
                .lines()
                .filter(|l| l.contains("preview"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let opened = page.current_url().await.unwrap().to_string();
    assert!(!opened.contains("sandboxd_link"), "{opened}");
    browser.screenshot("preview").await;
    page.goto(&sandbox_url).await.unwrap();

    // Upload a file larger than a JSON body may carry (10 MiB), so it can only go
    // through the streamed path; see it listed, download it back.
    let local = tempfile::tempdir().unwrap();
    let upload = local.path().join("from-the-browser.txt");
    let content: String = (0..400_000)
        .map(|n| format!("line {n:07} uploaded through the dashboard\n"))
        .collect();
    assert!(content.len() > 16 * 1024 * 1024);
    std::fs::write(&upload, &content).unwrap();
    let expected: String = sha2::Sha256::digest(content.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    browser
        .element("#upload-file")
        .await
        .send_keys(&upload.display().to_string())
        .await
        .unwrap();
    browser.click("#upload").await;
    browser
        .text_in("[data-file='from-the-browser.txt']", "from-the-browser.txt")
        .await;
    let href = browser
        .element("[data-file='from-the-browser.txt'] a[download]")
        .await
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    // The page fetches the download link with its cookie and hashes what came back.
    let downloaded = page
        .execute_async(
            "const [href, done] = arguments; fetch(href).then(r => r.arrayBuffer())
               .then(b => crypto.subtle.digest('SHA-256', b))
               .then(d => done([...new Uint8Array(d)].map(x => x.toString(16).padStart(2, '0')).join('')),
                     e => done(String(e)));",
            vec![serde_json::json!(href)],
        )
        .await
        .unwrap();
    assert_eq!(
        downloaded.as_str(),
        Some(expected.as_str()),
        "the same bytes back"
    );
    page.execute("document.getElementById('upload').scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.screenshot("files").await;

    // Extend the timeout to 90 minutes: the expiry moves from about 5 minutes away.
    let before = browser.text_in("[data-fact=Expires]", "in ").await;
    assert!(before.contains(" min"), "{before}");
    browser.click("#extend").await;
    browser.fill("#extend-minutes", "").await;
    browser.enter("#extend-minutes", "90").await;
    browser
        .text_in("[data-fact='Idle timeout']", "90 min")
        .await;
    let after = browser.text_in("[data-fact=Expires]", " h (").await;
    assert_ne!(before, after);

    // Rename it: the title and the list follow.
    browser.click("#rename").await;
    browser.fill("#rename-name", "").await;
    browser
        .enter("#rename-name", "renamed in the browser")
        .await;
    browser
        .text_in("#sandbox-title", "renamed in the browser")
        .await;

    // Pause, then resume.
    browser.click("#pause").await;
    browser.element("[data-facts] [data-status=paused]").await;
    browser.click("#resume").await;
    browser.element("[data-facts] [data-status=running]").await;

    // Snapshot it: the page says so and links to the snapshots.
    browser.click("#snapshot").await;
    let taken = browser
        .element("[data-snapshot-taken]")
        .await
        .attr("data-snapshot-taken")
        .await
        .unwrap()
        .unwrap();

    // Kill and delete, each after a confirmation.
    browser.click("#kill").await;
    browser.screenshot("confirm-kill").await;
    browser.click("dialog [data-confirm]").await;
    browser.element("[data-facts] [data-status=killed]").await;
    browser.click("#delete").await;
    browser.click("dialog [data-confirm]").await;
    browser.text_in("main [role=status]", "No sandboxes").await;

    // The audit log lists what was done, and filters it.
    page.goto(&format!("{}/#/audit", server.url)).await.unwrap();
    for action in [
        "sandbox.create",
        "sandbox.setTimeout",
        "sandbox.rename",
        "sandbox.pause",
        "sandbox.resume",
        "sandbox.kill",
        "sandbox.remove",
    ] {
        browser
            .element(&format!("tr[data-action='{action}']"))
            .await;
    }
    browser.screenshot("audit").await;
    browser.enter("#a-action", "sandbox.kill").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        // Read at once by the page: the table may be replaced between two WebDriver calls.
        let shown = page
            .execute(
                "return [...document.querySelectorAll('tr[data-action]')].map(r => r.dataset.action)",
                vec![],
            )
            .await
            .unwrap();
        let actions: Vec<String> = serde_json::from_value(shown).unwrap();
        if !actions.is_empty() && actions.iter().all(|a| a == "sandbox.kill") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "filtered: {actions:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // The snapshot outlived its sandbox: a new sandbox starts from it; it is removed once
    // that one is gone (refused before, the reason shown).
    page.goto(&format!("{}/#/snapshots", server.url))
        .await
        .unwrap();
    let row = format!("tr[data-snapshot='{taken}']");
    browser.element(&row).await;
    browser.screenshot("snapshots").await;
    browser.click(&format!("{row} [data-start]")).await;
    browser.element("[data-facts] [data-status=running]").await;
    let made = browser.text_in("[data-fact='Sandbox id']", "").await;
    page.goto(&format!("{}/#/snapshots", server.url))
        .await
        .unwrap();
    browser.click(&format!("{row} [data-remove]")).await;
    browser.click("dialog [data-confirm]").await;
    browser.text_in("[role=alert]", "kill them first").await;
    let (status, _) = server
        .post(
            KEY,
            "sandbox.remove",
            serde_json::json!({"sandboxId": made.trim()}),
        )
        .await;
    assert_eq!(status, 200);
    browser.click(&format!("{row} [data-remove]")).await;
    browser.click("dialog [data-confirm]").await;
    browser
        .text_in("main [role=status]", "No snapshots yet")
        .await;

    // A volume made on its page; a sandbox that mounts it is listed; removal is refused
    // until that sandbox is gone.
    page.goto(&format!("{}/#/volumes", server.url))
        .await
        .unwrap();
    browser
        .text_in("main [role=status]", "No volumes yet")
        .await;
    browser.fill("#v-size", "256").await;
    browser.enter("#v-name", "from-the-page").await;
    let volume_row = browser.text_in("tr[data-volume]", "from-the-page").await;
    assert!(volume_row.contains("256 MiB"), "{volume_row}");
    let volume = browser
        .element("tr[data-volume]")
        .await
        .attr("data-volume")
        .await
        .unwrap()
        .unwrap();
    let (status, mounted) = server
        .post(
            KEY,
            "sandbox.create",
            serde_json::json!({"environmentId": server.env_id, "template": "base",
                "volumes": [{"volumeId": volume, "path": "/data"}]}),
        )
        .await;
    assert_eq!(status, 200, "{mounted}");
    let mounted = mounted["sandboxId"].as_str().unwrap().to_owned();
    // The same address again does not reload the page: reload it.
    page.refresh().await.unwrap();
    browser
        .text_in("tr[data-volume] [data-mounted]", &mounted)
        .await;
    browser.screenshot("volumes").await;
    browser.click("tr[data-volume] [data-remove]").await;
    browser.click("dialog [data-confirm]").await;
    browser.text_in("[role=status]", "kill it first").await;
    let (status, _) = server
        .post(
            KEY,
            "sandbox.remove",
            serde_json::json!({"sandboxId": mounted}),
        )
        .await;
    assert_eq!(status, 200);
    browser.click("tr[data-volume] [data-remove]").await;
    browser.click("dialog [data-confirm]").await;
    browser
        .text_in("main [role=status]", "No volumes yet")
        .await;

    // An administrator makes a key (shown once), which works, then revokes it.
    page.goto(&format!("{}/#/access", server.url))
        .await
        .unwrap();
    browser.element("tr[data-member]").await;
    browser.enter("#k-name", "from-the-page").await;
    let secret = browser.text_in("[data-secret]", "sbx_").await;
    let (status, _) = server.get(&secret, "apiKey.current").await;
    assert_eq!(status, 200, "the new key works");
    browser.screenshot("access").await;
    let key_row = browser.text_in("tr[data-key]", "from-the-page").await;
    assert!(key_row.contains("active"), "{key_row}");
    page.execute(
        "[...document.querySelectorAll('tr[data-key]')].find(r => r.textContent.includes('from-the-page')).querySelector('button.danger').click()",
        vec![],
    )
    .await
    .unwrap();
    browser.click("dialog [data-confirm]").await;
    browser.text_in("tr[data-key]", "revoked").await;
    let (status, _) = server.get(&secret, "apiKey.current").await;
    assert_eq!(status, 401, "the revoked key is refused");

    // Add a member, give her a key, make her an admin, remove her: her key stops working.
    browser.enter("#m-name", "Ada").await;
    browser
        .text_in("tr[data-member='Ada']", "service:read")
        .await;
    page.execute(
        "const s = document.getElementById('k-user'); s.value = [...s.options].find(o => o.text === 'Ada').value;",
        vec![],
    )
    .await
    .unwrap();
    // Hers is in E2B's form, for E2B's SDKs: a key like any other.
    browser.click("#k-e2b").await;
    browser.enter("#k-name", "for-ada").await;
    browser.text_in("tr[data-key]", "for-ada").await;
    let her_key = browser.text_in("[data-secret]", "e2b_").await;
    assert!(
        her_key.len() == 68 && her_key[4..].chars().all(|c| c.is_ascii_hexdigit()),
        "{her_key}"
    );
    assert_ne!(her_key, secret);
    let (status, her) = server.get(&her_key, "apiKey.current").await;
    assert_eq!(status, 200, "{her}");
    browser
        .element("[data-role-of='Ada']")
        .await
        .select_by_value("admin")
        .await
        .unwrap();
    browser
        .text_in("main [role=status]", "Ada is now admin")
        .await;
    browser.screenshot("members").await;
    page.execute(
        "document.querySelector(\"tr[data-member='Ada'] button.danger\").click()",
        vec![],
    )
    .await
    .unwrap();
    browser.click("dialog [data-confirm]").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while page
        .execute(
            "return document.querySelectorAll(\"tr[data-member='Ada']\").length",
            vec![],
        )
        .await
        .unwrap()
        != 0
    {
        assert!(std::time::Instant::now() < deadline, "Ada is still listed");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (status, _) = server.get(&her_key, "apiKey.current").await;
    assert_eq!(status, 401, "a removed member's key is refused");

    // On a phone's screen.
    page.set_window_size(390, 844).await.unwrap();
    page.goto(&format!("{}/#/", server.url)).await.unwrap();
    browser.click("a[data-environment]").await;
    browser.text_in("main [role=status]", "No sandboxes").await;
    browser.screenshot("phone").await;
    browser.click("#theme").await;
    let theme: serde_json::Value = page
        .execute("return document.documentElement.dataset.theme", vec![])
        .await
        .unwrap();
    assert!(theme == "dark" || theme == "light", "{theme}");
    page.set_window_size(1280, 900).await.unwrap();
    if theme == "light" {
        browser.click("#theme").await;
    }
    browser.screenshot("dark").await;
    browser.close().await;
}

/// An agent's key asks for a host for its `allowlist` sandbox; an administrator sees the
/// request on the egress requests page (its reason as text, never markup), approves
/// it, and the sandbox's page lists the host as allowed while a denied one is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_egress_request_is_approved_in_the_dashboard() {
    let server = RunningServer::start_logged().await;
    let (status, sandbox) = server
        .post(
            KEY,
            "sandbox.create",
            serde_json::json!({"environmentId": server.env_id, "template": "base",
                "networkMode": "allowlist", "egress": {"allow": []}}),
        )
        .await;
    assert_eq!(status, 200, "{sandbox}");
    let sandbox_id = sandbox["sandboxId"].as_str().unwrap().to_owned();
    let (status, agent) = server
        .post(
            KEY,
            "apiKey.create",
            serde_json::json!({"name": "agent", "scopes": ["service:read", "deployment:create"]}),
        )
        .await;
    assert_eq!(status, 200, "{agent}");
    let agent = agent["secret"].as_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for (host, reason) in [
        ("pypi.org", "<b>pip install</b> requests"),
        ("evil.example", "exfiltrate"),
    ] {
        let (status, asked) = server
            .post(
                &agent,
                "sandbox.requestEgress",
                serde_json::json!({"sandboxId": sandbox_id, "host": host, "reason": reason}),
            )
            .await;
        assert_eq!(status, 200, "{asked}");
        ids.push(asked["requestId"].as_str().unwrap().to_owned());
    }

    let browser = Browser::start().await;
    let page = &browser.client;
    page.goto(&format!("{}/", server.url)).await.unwrap();
    browser.enter("#key", KEY).await;
    browser.element("a[data-environment]").await;
    browser.click("nav a[href='#/egress']").await;
    let approve = format!("[data-request='{}']", ids[0]);
    let deny = format!("[data-request='{}']", ids[1]);
    browser
        .text_in(
            &format!("{approve} .request-reason"),
            "<b>pip install</b> requests",
        )
        .await;
    let bold = page
        .find_all(fantoccini::Locator::Css(&format!("{approve} b")))
        .await
        .unwrap();
    assert!(bold.is_empty(), "a reason is text, never markup");
    browser.screenshot("egress-requests").await;
    browser.click(&format!("{approve} button.approve")).await;
    browser
        .text_in("main [role=status]", "pypi.org approved")
        .await;
    browser.click(&format!("{deny} button.deny")).await;
    browser
        .text_in("main [role=status]", "evil.example denied")
        .await;

    let (_, one) = server
        .get(KEY, &format!("sandbox.one?sandboxId={sandbox_id}"))
        .await;
    assert_eq!(one["egress"]["allow"], serde_json::json!(["pypi.org"]));

    // The sandbox's page: the host allowed, nothing left waiting.
    page.goto(&format!("{}/#/sandbox/{sandbox_id}", server.url))
        .await
        .unwrap();
    browser.element("#egress [data-allowed='pypi.org']").await;
    let waiting = page
        .find_all(fantoccini::Locator::Css("#egress [data-request]"))
        .await
        .unwrap();
    assert!(waiting.is_empty(), "both requests were decided");
    page.execute("document.getElementById('egress').scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.screenshot("egress-panel").await;
    browser.close().await;
}

/// A gVisor sandbox is paused to disk from its page: the facts say so with the memory
/// saved, and a resume brings it back running with its process; a snapshot of it with
/// its memory says how much among the snapshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gvisor_sandbox_is_paused_to_disk_in_the_dashboard() {
    let server = RunningServer::start_logged().await;
    let (status, sandbox) = server
        .post(
            KEY,
            "sandbox.create",
            serde_json::json!({"environmentId": server.env_id, "template": "base",
                "isolation": "gvisor"}),
        )
        .await;
    assert_eq!(status, 200, "{sandbox}");
    let sandbox_id = sandbox["sandboxId"].as_str().unwrap().to_owned();
    let (status, started) = server
        .post(
            KEY,
            "sandbox.processStart",
            serde_json::json!({"sandboxId": sandbox_id, "cmd": "sleep 600"}),
        )
        .await;
    assert_eq!(status, 200, "{started}");

    let browser = Browser::start().await;
    let page = &browser.client;
    page.goto(&format!("{}/", server.url)).await.unwrap();
    browser.enter("#key", KEY).await;
    browser.element("a[data-environment]").await;
    page.goto(&format!("{}/#/sandbox/{sandbox_id}", server.url))
        .await
        .unwrap();
    browser.click("#pause-to-disk").await;
    browser.element("[data-facts] [data-status=paused]").await;
    browser
        .text_in("[data-fact='Paused to']", "of memory saved")
        .await;
    let actions: serde_json::Value = page
        .execute(
            "return document.querySelector('.actions').textContent",
            vec![],
        )
        .await
        .unwrap();
    assert!(!actions.to_string().contains("null"), "{actions}");
    browser.screenshot("paused-to-disk").await;
    browser.click("#resume").await;
    browser.element("[data-facts] [data-status=running]").await;
    browser.text_in("[data-fact='Paused to']", "—").await;

    let (_, processes) = server
        .get(KEY, &format!("sandbox.processList?sandboxId={sandbox_id}"))
        .await;
    assert_eq!(
        processes[0]["processId"], started["processId"],
        "{processes}"
    );
    assert_eq!(processes[0]["status"], "running", "{processes}");
    // A snapshot with its memory says so among the snapshots.
    let (status, snapshot) = server
        .post(
            KEY,
            "sandbox.snapshot",
            serde_json::json!({"sandboxId": sandbox_id, "memory": true}),
        )
        .await;
    assert_eq!(status, 200, "{snapshot}");
    page.goto(&format!("{}/#/snapshots", server.url))
        .await
        .unwrap();
    browser
        .text_in(
            &format!(
                "[data-snapshot='{}'] [data-memory]",
                snapshot["snapshotId"].as_str().unwrap()
            ),
            "of memory",
        )
        .await;
    let (status, _) = server
        .post(
            KEY,
            "sandbox.kill",
            serde_json::json!({"sandboxId": sandbox_id}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, removed) = server
        .post(
            KEY,
            "snapshot.remove",
            serde_json::json!({"snapshotId": snapshot["snapshotId"]}),
        )
        .await;
    assert_eq!(status, 200, "{removed}");
    browser.close().await;
}

/// A person builds a template on the Templates page: a Dockerfile typed into the editor
/// and a file picked for its `COPY`; the build's log streams in while it runs, each
/// `RUN` line shown as text; the template is listed with its version, its log read back,
/// a sandbox of it holds the file, and it is removed after a confirmation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_is_built_in_the_dashboard() {
    struct BuildImages;
    impl Drop for BuildImages {
        fn drop(&mut self) {
            // By name: a step's image is the parent of the next one's.
            let _ = std::process::Command::new("bash")
                .args([
                    "-c",
                    "for r in sandboxd-templates sandboxd-build-cache; do docker images --format '{{.Repository}}:{{.Tag}}' --filter reference=\"$r:*\" | xargs -r docker rmi >/dev/null 2>&1; done",
                ])
                .status();
        }
    }
    let _images = BuildImages;
    let server = RunningServer::start_logged().await;
    let dir = tempfile::tempdir().unwrap();
    let picked = dir.path().join("hello.txt");
    std::fs::write(&picked, "picked in the browser\n").unwrap();

    let browser = Browser::start().await;
    let page = &browser.client;
    page.goto(&format!("{}/", server.url)).await.unwrap();
    browser.enter("#key", KEY).await;
    browser.element("a[data-environment]").await;
    browser.click("nav a[href='#/templates']").await;
    browser
        .text_in("main [role=status]", "No templates built yet")
        .await;
    browser.fill("#t-name", "from-the-page").await;
    browser
        .fill(
            "#t-dockerfile",
            "FROM base\nCOPY hello.txt /home/user/hello.txt\nRUN echo '<b>built</b>' && echo to-stderr >&2\n",
        )
        .await;
    browser
        .element("#t-files")
        .await
        .send_keys(picked.to_str().unwrap())
        .await
        .unwrap();
    browser.click("#new-template button[type=submit]").await;
    browser.text_in("#build-log", "<b>built</b>").await;
    browser.text_in("#build-log .stderr", "to-stderr").await;
    let bold = page
        .find_all(fantoccini::Locator::Css("#build-log b"))
        .await
        .unwrap();
    assert!(bold.is_empty(), "a log line is text, never markup");
    browser.text_in("#build-progress", "Step 3/3 : RUN").await;
    browser.element("#build-outcome[data-status=ready]").await;
    browser.screenshot("template-built").await;

    // A sandbox of it holds the picked file.
    let (status, sandbox) = server
        .post(
            KEY,
            "sandbox.create",
            serde_json::json!({"environmentId": server.env_id, "template": "from-the-page"}),
        )
        .await;
    assert_eq!(status, 200, "{sandbox}");
    let (status, run) = server
        .post(
            KEY,
            "sandbox.exec",
            serde_json::json!({"sandboxId": sandbox["sandboxId"], "cmd": "cat hello.txt"}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["stdout"], "picked in the browser\n");
    let (status, _) = server
        .post(
            KEY,
            "sandbox.kill",
            serde_json::json!({"sandboxId": sandbox["sandboxId"]}),
        )
        .await;
    assert_eq!(status, 200);

    // Listed once the build ended, and after a reload, with its version's log read
    // back.
    let row = "tr[data-template='from-the-page']";
    browser.text_in(row, "v1").await;
    page.refresh().await.unwrap();
    let row = "tr[data-template='from-the-page']";
    browser.text_in(row, "v1").await;
    browser.click(&format!("{row} summary")).await;
    browser
        .text_in(&format!("{row} [data-version='1'] [data-status]"), "ready")
        .await;
    browser.click(&format!("{row} [data-log]")).await;
    browser.text_in("#build-log", "<b>built</b>").await;
    browser.element("#build-outcome[data-status=ready]").await;
    browser.screenshot("templates").await;

    // Removed after a confirmation.
    browser.click(&format!("{row} [data-remove]")).await;
    browser.click("dialog [data-confirm]").await;
    browser
        .text_in("main [role=status]", "No templates built yet")
        .await;
    let (_, all) = server.get(KEY, "template.all").await;
    assert_eq!(all, serde_json::json!([]));
    browser.close().await;
}
