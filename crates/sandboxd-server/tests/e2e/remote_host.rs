//! A remote server for the tests: the second engine `scripts/remote-engine.sh up`
//! started, behind an sshd of the test's own (its own port, key authentication,
//! loopback only), in a private mount namespace where that engine's socket is bound
//! over `/var/run/docker.sock`, as on a real host. The sshd can be cut (listener and
//! established sessions) and started again on the same port.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sandboxd_ssh::{HostKey, SshTarget};
use tempfile::TempDir;

/// Where the script keeps the second engine and the keys.
pub fn remote_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("SANDBOXD_REMOTE_DIR").unwrap_or_else(|_| "/tmp/sandboxd-remote".into()),
    )
}

/// The second engine's address, for looking at what the tests made there.
pub fn remote_docker_host() -> String {
    format!("unix://{}/docker.sock", remote_dir().display())
}

pub struct RemoteHost {
    pub port: u16,
    /// The socket bound over the server's `/var/run/docker.sock`.
    socket: PathBuf,
    config: TempDir,
    sshd: Option<Child>,
}

impl RemoteHost {
    /// Starts an sshd in front of the second engine; fails loudly when that engine is
    /// not there.
    pub fn start() -> Self {
        Self::start_for(remote_dir().join("docker.sock"))
    }

    /// As [`RemoteHost::start`], with no SFTP subsystem (as some servers are set up).
    pub fn start_without_sftp() -> Self {
        Self::start_with(remote_dir().join("docker.sock"), false)
    }

    /// An sshd whose `/var/run/docker.sock` is `socket` (an engine of the test's own).
    pub fn start_for(socket: PathBuf) -> Self {
        Self::start_with(socket, true)
    }

    fn start_with(socket: PathBuf, sftp: bool) -> Self {
        let dir = remote_dir();
        assert!(
            dir.join("docker.sock").exists() && dir.join("client_key").exists(),
            "the remote engine is not set up: run `bash scripts/remote-engine.sh up` (the test script does)"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let config = tempfile::tempdir().expect("temp dir");
        let text = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\n\
             AuthorizedKeysFile {dir}/authorized_keys\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n\
             AllowStreamLocalForwarding yes\nStreamLocalBindUnlink yes\n\
             AllowTcpForwarding yes\nX11Forwarding no\nPidFile none\nMaxSessions 100\n\
             MaxStartups 100\n{subsystem}",
            dir = dir.display(),
            subsystem = if sftp {
                "Subsystem sftp internal-sftp\n"
            } else {
                ""
            },
        );
        std::fs::write(config.path().join("sshd_config"), text).expect("sshd config");
        let mut host = Self {
            port,
            socket,
            config,
            sshd: None,
        };
        host.resume();
        host
    }

    /// Starts sshd (again) on the same port.
    pub fn resume(&mut self) {
        let script = format!(
            "mount --bind {sock} /var/run/docker.sock && exec /usr/sbin/sshd -D -e -f {conf}",
            sock = self.socket.display(),
            conf = self.config.path().join("sshd_config").display(),
        );
        let log = std::fs::File::create(self.config.path().join("sshd.log")).expect("log");
        let child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("unshare and sshd");
        self.sshd = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not listen: {}",
                std::fs::read_to_string(self.config.path().join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The listener is this sshd's (not one of another test that took the same free
        // port), and the probe's connection is gone before anyone counts sessions.
        let exited = self
            .sshd
            .as_mut()
            .and_then(|child| child.try_wait().ok())
            .flatten();
        assert!(
            exited.is_none(),
            "sshd ended: {}",
            std::fs::read_to_string(self.config.path().join("sshd.log")).unwrap_or_default()
        );
        while self.sessions() > 0 {
            assert!(Instant::now() < deadline, "the probe's session did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts the server off: the listener and every established session end.
    pub fn cut(&mut self) {
        if let Some(mut child) = self.sshd.take() {
            let _ = Command::new("pkill")
                .args(["-KILL", "-P", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SSH connections established now (sshd's children, one per connection).
    pub fn sessions(&self) -> usize {
        let Some(child) = &self.sshd else { return 0 };
        let out = Command::new("pgrep")
            .args(["-P", &child.id().to_string()])
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&out.stdout).lines().count()
    }

    /// The host key sshd presents.
    pub fn host_key() -> HostKey {
        let text = std::fs::read_to_string(remote_dir().join("host_key.pub")).expect("host key");
        HostKey::parse(&text).expect("a host key")
    }

    /// The private key sandboxd logs in with.
    pub fn client_key() -> String {
        std::fs::read_to_string(remote_dir().join("client_key")).expect("client key")
    }

    /// How sandboxd reaches this host, with the host key pinned.
    pub fn target(&self) -> SshTarget {
        SshTarget {
            address: "127.0.0.1".into(),
            port: self.port,
            user: "root".into(),
            private_key: Self::client_key(),
            host_key: Some(Self::host_key()),
            policy: sandboxd_ssh::AddressPolicy::any(),
        }
    }
}

impl Drop for RemoteHost {
    fn drop(&mut self) {
        self.cut();
    }
}
