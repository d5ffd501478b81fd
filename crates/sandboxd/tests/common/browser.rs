//! A real browser for the dashboard's tests: Debian's headless Chromium driven through
//! its chromedriver (WebDriver) with fantoccini, with a fresh profile per test. Missing
//! `chromedriver` fails the test loudly: CI installs it.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Self {
        let port = super::free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver) is needed: .ci/run installs it");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--no-first-run".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({"binary": "/usr/bin/chromium", "args": args}),
        );
        // chromedriver listens on loopback in plain HTTP: no TLS stack.
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a Chromium session");
        Self {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Waits up to 20 s for an element matching `css` whose text holds `needle`.
    pub async fn text_in(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        loop {
            if let Ok(elements) = self.client.find_all(Locator::Css(css)).await {
                for element in elements {
                    if let Ok(text) = element.text().await {
                        if text.contains(needle) {
                            return text;
                        }
                        last = text;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in {css} (last: {last:?})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the element matching `css`, once it is there.
    pub async fn click(&self, css: &str) {
        self.element(css)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("cannot click {css}: {e}"));
    }

    /// Replaces what the field matching `css` holds with `text`.
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.element(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Types `text` into the field matching `css`, then Enter.
    pub async fn enter(&self, css: &str, text: &str) {
        let field = self.element(css).await;
        field.send_keys(text).await.unwrap();
        field
            .send_keys(&fantoccini::key::Key::Enter.to_string())
            .await
            .unwrap();
    }

    /// Waits up to 20 s for an element matching `css`; a failure names what the page's
    /// alerts say (a refusal the dashboard shows).
    pub async fn element(&self, css: &str) -> fantoccini::elements::Element {
        match self
            .client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(error) => {
                let mut alerts = Vec::new();
                if let Ok(found) = self.client.find_all(Locator::Css("[role=alert]")).await {
                    for alert in found {
                        alerts.push(alert.text().await.unwrap_or_default());
                    }
                }
                panic!("no {css}: {error}; the page's alerts: {alerts:?}")
            }
        }
    }

    /// Saves the page as `<name>.png` among the test's artifacts, and under
    /// `docs/screenshots/` when `SANDBOXD_UPDATE_SCREENSHOTS` is set.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let artifacts = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
        std::fs::create_dir_all(&artifacts).unwrap();
        std::fs::write(artifacts.join(format!("{name}.png")), &png).unwrap();
        if std::env::var_os("SANDBOXD_UPDATE_SCREENSHOTS").is_some() {
            let docs =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/screenshots");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(format!("{name}.png")), &png).unwrap();
        }
    }
}

impl Browser {
    /// Ends the session: Chromium quits.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // A Chromium left behind by a failed test goes too: it runs on this profile.
        let _ = Command::new("pkill")
            .args(["-f", &self._profile.path().display().to_string()])
            .status();
    }
}
