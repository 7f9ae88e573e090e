//! A runner fleet on one host, for the suites: amberd on the host, each runner in a network
//! namespace of its own (a "machine" joined to the host by a veth pair), a test CA and a
//! certificate for the host's addresses on those links, a pool token, and a bare git
//! repository the runners clone over the `file://` transport.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::daemon::bin_path;
use crate::dial::DialSetup;
use crate::netns::NetNs;
use crate::steps::git;

/// The pool the runners join.
pub const POOL: &str = "default";

/// The fleet's machines and files.
pub struct FleetKit {
    pub tls: DialSetup,
    pub machines: Vec<NetNs>,
    /// `file://` URL of the bare repository.
    pub repo_url: String,
    pub repo: PathBuf,
    /// Where runners make workspaces (`[fleet] workspace_root`).
    pub work: PathBuf,
}

/// A running `amber-exec runner`.
pub struct Runner {
    pub child: Child,
    pub id: String,
    log: PathBuf,
}

impl FleetKit {
    /// `machines` network namespaces (at most 4), the TLS files, and a repository whose
    /// `main` holds `README.md` and `src/lib.txt`.
    pub fn new(machines: u32) -> FleetKit {
        let machines: Vec<NetNs> = (0..machines).map(NetNs::numbered).collect();
        let addresses: Vec<&str> = machines.iter().map(|m| m.host_addr.as_str()).collect();
        let tls = DialSetup::for_addresses(&addresses);
        let root = tls.dir.path().canonicalize().unwrap();
        let seed = root.join("seed");
        std::fs::create_dir_all(seed.join("src")).unwrap();
        std::fs::write(seed.join("README.md"), "# app\n").unwrap();
        std::fs::write(seed.join("src/lib.txt"), "one\ntwo\n").unwrap();
        git(&seed, &["init", "-q", "-b", "main"]);
        git(&seed, &["add", "-A"]);
        git(&seed, &["commit", "-qm", "seed"]);
        let repo = root.join("repo.git");
        let status = Command::new("git")
            .args(["clone", "-q", "--bare"])
            .arg(&seed)
            .arg(&repo)
            .status()
            .unwrap();
        assert!(status.success(), "git clone --bare");
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        FleetKit {
            repo_url: format!("file://{}", repo.display()),
            repo,
            work,
            tls,
            machines,
        }
    }

    /// amberd's config: the listener on every address, `[fleet]` with the pool, fast
    /// heartbeats and `extra` appended.
    pub fn config(&self, extra: &str) -> String {
        let root = self.tls.cert.parent().unwrap();
        format!(
            "\n[executors]\nlisten = \"0.0.0.0:{port}\"\ntls_cert = \"{cert}\"\ntls_key = \"{key}\"\n\
             \n[fleet]\nworkspace_root = \"{work}\"\nheartbeat_secs = 2\nidle_release_secs = 0\n{extra}\n\
             \n[fleet.pools.{POOL}]\ntoken_file = \"{token}\"\n",
            port = self.tls.port,
            cert = self.tls.cert.display(),
            key = root.join("key.pem").display(),
            work = self.work.display(),
            token = self.tls.token_file.display(),
        )
    }

    /// Starts runner `id` on machine `machine` with `capacity`, the pool's token and `args`.
    pub fn runner(&self, machine: usize, id: &str, capacity: u32, args: &[&str]) -> Runner {
        self.runner_with(machine, id, capacity, POOL, &self.tls.token_file, args)
    }

    /// [`FleetKit::runner`] in `pool` with `token_file`.
    pub fn runner_with(
        &self,
        machine: usize,
        id: &str,
        capacity: u32,
        pool: &str,
        token_file: &Path,
        args: &[&str],
    ) -> Runner {
        let ns = &self.machines[machine];
        let state = self.tls.dir.path().join(format!("state-{id}"));
        let log = self.tls.dir.path().join(format!("runner-{id}.log"));
        let child = Command::new("ip")
            .args(ns.exec_prefix())
            .arg(bin_path("amber-exec"))
            .arg("runner")
            .arg("--connect")
            .arg(format!(
                "wss://{}:{}/executors",
                ns.host_addr, self.tls.port
            ))
            .args([
                "--pool",
                pool,
                "--id",
                id,
                "--capacity",
                &capacity.to_string(),
            ])
            .arg("--token-file")
            .arg(token_file)
            .arg("--ca")
            .arg(&self.tls.ca)
            .arg("--workspaces")
            .arg(&self.work)
            .arg("--state-dir")
            .arg(&state)
            .arg("--cache-dir")
            .arg(state.join("cache"))
            .args(args)
            .env("AMBER_EXEC_LOG", "info,amber_executor=debug")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .expect("start amber-exec runner");
        Runner {
            child,
            id: id.to_owned(),
            log,
        }
    }
}

impl Runner {
    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` to it.
    pub fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on a child of this process.
        unsafe { libc::kill(pid, signal) };
    }

    /// Waits up to `timeout` for it to exit; its exit code.
    pub fn wait_exit(&mut self, timeout: std::time::Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- runner {} log ---\n{}", self.id, self.log());
        }
    }
}
