//! A private tmux server for the TUI suites: start the real `amber` in an 80×24 pane against
//! a [`TestDaemon`], send keys, read the screen, wait for it to show something.
// The suite starts the real binaries, git and shells as the user.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use amber_tests::{TestDaemon, bin_path};

/// How long a screen condition may take to hold.
pub(crate) const SCREEN_TIMEOUT: Duration = Duration::from_secs(20);

/// A private tmux server (own `-L` socket), killed on drop.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    /// `tag` keeps the servers of tests running in one process apart.
    pub(crate) fn new(tag: &str) -> Tmux {
        assert!(
            Command::new("tmux")
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success()),
            "tmux is required for the TUI end-to-end test (.ci/run installs it)"
        );
        Tmux {
            socket: format!("amber-e2e6-{}-{tag}", std::process::id()),
        }
    }

    pub(crate) fn cmd(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket, "-f", "/dev/null"]);
        cmd
    }

    pub(crate) fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `amber ARGS` in a new 80×24 session `name`; the pane stays after amber exits.
    pub(crate) fn start(&self, name: &str, daemon: &TestDaemon, args: &[&str]) {
        self.start_in(name, daemon, args, &daemon.workspace, (80, 24));
    }

    /// Like [`Tmux::start`], in directory `cwd` on a `size` (columns, rows) screen.
    pub(crate) fn start_in(
        &self,
        name: &str,
        daemon: &TestDaemon,
        args: &[&str],
        cwd: &Path,
        size: (u16, u16),
    ) {
        self.start_with(name, daemon, args, cwd, size, &[]);
    }

    /// Like [`Tmux::start`], with these variables in amber's environment.
    pub(crate) fn start_env(
        &self,
        name: &str,
        daemon: &TestDaemon,
        env: &[(&str, &str)],
        args: &[&str],
    ) {
        self.start_with(name, daemon, args, &daemon.workspace, (80, 24), env);
    }

    fn start_with(
        &self,
        name: &str,
        daemon: &TestDaemon,
        args: &[&str],
        cwd: &Path,
        size: (u16, u16),
        vars: &[(&str, &str)],
    ) {
        let amber = bin_path("amber");
        let home = daemon.dir.path().join("home");
        let mut shell = format!(
            "'{}' --socket '{}' --no-autostart",
            amber.display(),
            daemon.socket.display()
        );
        for a in args {
            shell.push_str(&format!(" '{a}'"));
        }
        shell.push_str("; echo \"[amber exited $?]\"; sleep 600");
        let env = |k: &str, v: &Path| format!("{k}={}", v.display());
        let mut cmd = self.cmd();
        let (width, height) = (size.0.to_string(), size.1.to_string());
        cmd.args(["new-session", "-d", "-s", name, "-x", &width, "-y", &height])
            .args(["-e", &env("HOME", &home)])
            .args([
                "-e",
                &env("XDG_RUNTIME_DIR", &daemon.dir.path().join("run")),
            ])
            .args(["-e", &env("XDG_CONFIG_HOME", &home.join(".config"))])
            .args(["-e", &env("XDG_STATE_HOME", &home.join(".local/state"))])
            .args(
                vars.iter()
                    .flat_map(|(k, v)| ["-e".to_owned(), format!("{k}={v}")]),
            )
            .args(["-c", &cwd.display().to_string()])
            .arg(shell)
            .env("TERM", "xterm-256color");
        let out = cmd.output().expect("tmux new-session");
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Copies everything the program in pane `name` writes (escape sequences included, as
    /// tmux reads them) to `file`.
    pub(crate) fn pipe_output(&self, name: &str, file: &Path) {
        let sink = format!("cat >> '{}'", file.display());
        self.run(&["pipe-pane", "-O", "-t", name, &sink]);
    }

    pub(crate) fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Types `text` literally.
    pub(crate) fn type_text(&self, name: &str, text: &str) {
        self.run(&["send-keys", "-t", name, "-l", text]);
    }

    pub(crate) fn screen(&self, name: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", name])
    }

    /// Waits until `cond(screen)` holds; returns that screen.
    pub(crate) fn wait(&self, name: &str, what: &str, cond: impl Fn(&str) -> bool) -> String {
        self.wait_within(name, what, SCREEN_TIMEOUT, cond)
    }

    /// Like [`Tmux::wait`], with its own bound.
    pub(crate) fn wait_within(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        cond: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen(name);
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}
