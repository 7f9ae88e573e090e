//! A real OpenSSH server for the executor suites: `sshd` from Debian on a free loopback port,
//! with a host key and a client key of its own, accepting that key for the user running the
//! tests, and a client config that reaches it as host `exec-host` with the host key pinned.
//! Everything lives in a temp dir; the server stops on drop. The session's environment is set
//! by the server (`SetEnv`): `PATH` finds the built `amber-exec`, `XDG_RUNTIME_DIR` keeps the
//! executor's sockets in the temp dir, and `HOME` is a fresh one there (the real account's
//! dotfiles never run).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::daemon::bin_path;

/// The `Host` alias the client config names.
pub const HOST: &str = "exec-host";

/// A running sshd and what reaches it.
pub struct Sshd {
    pub dir: TempDir,
    /// The address it listens on.
    pub addr: String,
    pub port: u16,
    /// A directory holding an `ssh` that reads [`Sshd::client_config`]: put it first on the
    /// `PATH` of the amberd that should use this server (ssh reads `~/.ssh/config` of the
    /// passwd entry, not of `$HOME`, so a test cannot point it elsewhere otherwise).
    pub ssh_dir: PathBuf,
    child: Child,
}

impl Sshd {
    /// Starts sshd on loopback and waits until it accepts connections.
    pub fn start() -> Sshd {
        Sshd::start_at(None, "127.0.0.1")
    }

    /// Starts sshd inside network namespace `netns` (when given), listening on `addr`.
    pub fn start_at(netns: Option<&str>, addr: &str) -> Sshd {
        let dir = tempfile::Builder::new()
            .prefix("amber-sshd-")
            .tempdir()
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        for key in ["host_key", "client_key"] {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(root.join(key))
                .status()
                .unwrap();
            assert!(status.success(), "ssh-keygen {key}");
        }
        std::fs::copy(root.join("client_key.pub"), root.join("authorized_keys")).unwrap();
        let run = root.join("run");
        std::fs::create_dir_all(&run).unwrap();
        set_mode(&run, 0o700);
        // The session's home: the login's own dotfiles (a real ~/.bashrc) stay out of it.
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        // sshd insists on its privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let bin_dir = bin_path("amber-exec").parent().unwrap().to_owned();
        let config = root.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress {addr}\nHostKey {root}/host_key\nPidFile {root}/sshd.pid\n\
                 AuthorizedKeysFile {root}/authorized_keys\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n\
                 SetEnv PATH={bin}:/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR={run} HOME={home}\n",
                root = root.display(),
                bin = bin_dir.display(),
                run = run.display(),
                home = home.display(),
            ),
        )
        .unwrap();
        let host_key = std::fs::read_to_string(root.join("host_key.pub")).unwrap();
        std::fs::write(
            root.join("known_hosts"),
            format!("[{addr}]:{port} {}", host_key.trim()),
        )
        .unwrap();
        std::fs::write(
            root.join("ssh_config"),
            format!(
                "Host {HOST}\n  HostName {addr}\n  Port {port}\n  User {user}\n  \
                 IdentityFile {root}/client_key\n  IdentitiesOnly yes\n  \
                 UserKnownHostsFile {root}/known_hosts\n  StrictHostKeyChecking yes\n  \
                 LogLevel ERROR\n",
                user = current_user(),
                root = root.display(),
            ),
        )
        .unwrap();
        let ssh_dir = root.join("bin");
        std::fs::create_dir_all(&ssh_dir).unwrap();
        let shim = ssh_dir.join("ssh");
        std::fs::write(
            &shim,
            format!(
                "#!/bin/sh\nexec /usr/bin/ssh -F {} \"$@\"\n",
                root.join("ssh_config").display()
            ),
        )
        .unwrap();
        set_mode(&shim, 0o755);
        let mut sshd = match netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns, "/usr/sbin/sshd"]);
                cmd
            }
            None => Command::new("/usr/sbin/sshd"),
        };
        let child = sshd
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(root.join("sshd.log")).unwrap(),
            ))
            .spawn()
            .expect("start /usr/sbin/sshd (Debian: openssh-server)");
        let sshd = Sshd {
            dir,
            addr: addr.to_owned(),
            port,
            ssh_dir,
            child,
        };
        sshd.wait_ready();
        sshd
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((self.addr.as_str(), self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// `PATH` for an amberd that should reach this server as [`HOST`].
    pub fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.ssh_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
