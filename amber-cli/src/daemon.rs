//! `daemon start|stop|restart|status|install-systemd`. `stop` and `status` never autostart: asking a
//! daemon that is not running for its status or to stop must not start one. (`daemon logs`
//! lives in `logs.rs`, the unit files in `systemd.rs`.)

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_client::{Client, ClientError, daemon_answers, resolve_socket};
use amber_proto::DaemonStatus;

use crate::args::ConnectArgs;
use crate::output::{self, connect_options};
use crate::systemd;
use crate::turn::exit;

/// How long `daemon stop` waits for the socket to go quiet.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// `daemon start`: autostart explicitly, print socket and pid.
pub(crate) async fn start(conn: &ConnectArgs) -> anyhow::Result<u8> {
    let socket = resolve_socket(conn.socket.clone());
    let was_running = daemon_answers(&socket).await;
    let mut opts = connect_options(conn, false);
    opts.autostart = true;
    let client = Client::connect(opts).await?;
    let status = client.daemon_status().await?;
    let verb = if was_running {
        "already running"
    } else {
        "started"
    };
    output::line(&format!(
        "amberd {verb}: pid {} on {}",
        status.pid,
        client.socket().display()
    ))?;
    Ok(exit::OK)
}

/// How a stop went.
enum Stopped {
    NotRunning(PathBuf),
    Done,
    /// Stopped, and amberd.socket listens on: the next connection starts it again.
    UnderSystemd,
}

/// `daemon stop`: `daemon/shutdown`, then wait until the socket stops answering.
pub(crate) async fn stop(conn: &ConnectArgs) -> anyhow::Result<u8> {
    match shut_down(conn).await? {
        Stopped::NotRunning(socket) => {
            output::line(&format!("amberd is not running at {}", socket.display()))?;
        }
        Stopped::Done => output::line("amberd stopped")?,
        Stopped::UnderSystemd => output::line(
            "amberd stopped; amberd.socket still listens and starts it on the next connection \
             (`systemctl --user stop amberd.socket` stops that too)",
        )?,
    }
    Ok(exit::OK)
}

/// `daemon restart`: stop (persisting every session), then start with this process's
/// environment, so `AMBER_BASE_URL` and friends exported since take effect.
pub(crate) async fn restart(conn: &ConnectArgs) -> anyhow::Result<u8> {
    let stopped = shut_down(conn).await?;
    if matches!(stopped, Stopped::UnderSystemd) {
        output::note(
            "amberd runs under systemd: it starts with the unit's environment, not this \
             shell's (`systemctl --user import-environment AMBER_BASE_URL AMBER_MODEL` first)",
        );
    }
    let mut opts = connect_options(conn, false);
    opts.autostart = true;
    let client = Client::connect(opts).await?;
    let status = client.daemon_status().await?;
    output::line(&format!(
        "amberd restarted: pid {} on {}",
        status.pid,
        client.socket().display()
    ))?;
    Ok(exit::OK)
}

/// Asks the daemon to shut down and waits until it has.
async fn shut_down(conn: &ConnectArgs) -> anyhow::Result<Stopped> {
    let socket = resolve_socket(conn.socket.clone());
    let mut opts = connect_options(conn, false);
    opts.autostart = false;
    let client = match Client::connect(opts).await {
        Ok(client) => client,
        Err(ClientError::DaemonNotRunning { socket }) => return Ok(Stopped::NotRunning(socket)),
        Err(e) => return Err(e.into()),
    };
    // Under systemd the socket keeps answering after amberd exits (the next connection
    // starts it again), so there the wait is for the process, not for a quiet socket.
    let pid = client.daemon_status().await.ok().map(|status| status.pid);
    let systemd_pid = pid.filter(|pid| runs_under_systemd(*pid));
    match client.daemon_shutdown().await {
        // The daemon may close the connection before its answer gets out.
        Ok(_) | Err(ClientError::Transport(_)) => {}
        Err(e) => return Err(e.into()),
    }
    drop(client);
    let deadline = Instant::now() + STOP_TIMEOUT;
    if let Some(pid) = systemd_pid {
        while process_alive(pid) {
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "amberd (pid {pid}) still runs {} s after daemon/shutdown",
                    STOP_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        return Ok(Stopped::UnderSystemd);
    }
    while daemon_answers(&socket).await {
        if Instant::now() >= deadline {
            anyhow::bail!(
                "amberd at {} still answers {} s after daemon/shutdown",
                socket.display(),
                STOP_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The socket goes quiet before the daemon has written its last session and let go of
    // its data dir's lock: a daemon started right after must not find it still held.
    if let Some(pid) = pid {
        while process_alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(Stopped::Done)
}

/// `daemon status [--json]`.
pub(crate) async fn status(conn: &ConnectArgs, json: bool) -> anyhow::Result<u8> {
    let mut opts = connect_options(conn, false);
    opts.autostart = false;
    let client = match Client::connect(opts).await {
        Ok(client) => client,
        Err(ClientError::DaemonNotRunning { socket }) => {
            output::note(&format!("amberd is not running at {}", socket.display()));
            return Ok(exit::ERROR);
        }
        Err(e) => return Err(e.into()),
    };
    let raw = client
        .request_json::<amber_proto::methods::DaemonStatus>(&amber_proto::Empty {})
        .await?;
    if json {
        output::line(&serde_json::to_string_pretty(&raw)?)?;
        return Ok(exit::OK);
    }
    let status: DaemonStatus = serde_json::from_value(raw)?;
    let server = &client.server_info().server_info;
    let at = match client.remote() {
        Some(host) => format!("(on the remote host {host})"),
        None => client.socket().display().to_string(),
    };
    output::line(&status_text(&status, &server.name, &at))?;
    Ok(exit::OK)
}

/// `daemon install-systemd`. The routines' timer gets the schedules of the running
/// daemon's routines (it is not started for this); without one, every minute.
pub(crate) async fn install_systemd(
    conn: &ConnectArgs,
    dir: Option<PathBuf>,
    amberd: Option<PathBuf>,
    force: bool,
) -> anyhow::Result<u8> {
    let env = |key: &str| std::env::var_os(key);
    let default_dir = dir.is_none();
    let dir = match dir.or_else(|| systemd::default_unit_dir(&env)) {
        Some(dir) => dir,
        None => anyhow::bail!("neither XDG_CONFIG_HOME nor HOME is set; pass --dir"),
    };
    let amberd = systemd::resolve_amberd(amberd)?;
    let amber_cli = std::path::absolute(std::env::current_exe()?)?;
    let calendars = crate::routine::calendars(conn).await;
    let units = systemd::Units {
        amberd: &amberd,
        amber_cli: &amber_cli,
        calendars: calendars.as_deref(),
    };
    let done = systemd::install(&dir, &units, force)?;
    output::line(&systemd::report(&done, default_dir))?;
    if calendars.is_none() {
        output::note(
            "amberd did not answer with its routines: amber-routines.timer wakes it every \
             minute (run install-systemd again while amberd runs, or `routine add`, to \
             write their schedules)",
        );
    }
    Ok(exit::OK)
}

/// Whether `pid` runs in amberd.service's cgroup, i.e. systemd started it.
fn runs_under_systemd(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .is_ok_and(|cgroups| in_amberd_service(&cgroups))
}

/// `/proc/PID/cgroup` names the unit: `0::/user.slice/…/app.slice/amberd.service`.
pub(crate) fn in_amberd_service(cgroups: &str) -> bool {
    cgroups
        .lines()
        .filter_map(|l| l.rsplit(':').next())
        .any(|path| path.split('/').any(|part| part == "amberd.service"))
}

/// Alive and not a zombie (systemd reaps its children promptly; anyone else may not).
fn process_alive(pid: u32) -> bool {
    let stat = Path::new("/proc").join(pid.to_string()).join("stat");
    match std::fs::read_to_string(stat) {
        // `pid (comm) S ...`: the state follows the last `)`.
        Ok(text) => text
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// `daemon status`'s human text.
pub(crate) fn status_text(s: &DaemonStatus, name: &str, socket: &str) -> String {
    let name = if name.is_empty() { "amberd" } else { name };
    let mut text = format!(
        "{name} {}\npid          {}\nsocket       {socket}\nuptime       {}\nsessions     {}\nconnections  {}",
        s.version,
        s.pid,
        uptime(s.uptime_ms),
        s.sessions,
        s.connections
    );
    if let Some(p) = &s.provider {
        let key = if p.key_set { "key set" } else { "no key" };
        let url = p.base_url.as_deref().unwrap_or("not configured");
        let model = if p.model.is_empty() {
            "(server's)"
        } else {
            &p.model
        };
        text.push_str(&format!("\nprovider     {url} · {model} · {key}"));
    }
    if let Some(error) = &s.config_error {
        text.push_str(&format!(
            "\nconfig       not reloaded (the last good one is in force): {error}"
        ));
    }
    if let Some(listen) = &s.executor_listener {
        text.push_str(&format!("\nexecutors    dial in at {listen}"));
    }
    for cap in &s.budget {
        text.push_str(&format!(
            "\nbudget       {} ${:.2} of ${:.2} ({})",
            cap.scope.named(cap.key.as_deref()),
            cap.spent_usd.usd(),
            cap.cap_usd.usd(),
            cap.period
        ));
    }
    for used in &s.environments {
        let e = &used.environment;
        let state = match e.state {
            amber_proto::EnvironmentState::Connecting => "connecting",
            amber_proto::EnvironmentState::Connected => "connected",
            amber_proto::EnvironmentState::Lost => "lost, attaching again",
            amber_proto::EnvironmentState::Gone => "gone",
            amber_proto::EnvironmentState::Queued => "waiting for a runner",
        };
        let host = e
            .executor
            .as_ref()
            .map(|x| format!(" on {} (pid {})", x.hostname, x.pid))
            .unwrap_or_default();
        let plural = if used.sessions == 1 { "" } else { "s" };
        text.push_str(&format!(
            "\nexecutor     {}{host}: {state}, {} session{plural}",
            e.spec, used.sessions
        ));
    }
    text
}

/// `3d 4h`, `2h 05m`, `4m 07s`, `12s`.
pub(crate) fn uptime(ms: u64) -> String {
    let secs = ms / 1000;
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_the_service_cgroup() {
        let v2 = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/amberd.service\n";
        assert!(in_amberd_service(v2));
        let terminal = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/\
                        app-gnome-kitty-1234.scope\n";
        assert!(!in_amberd_service(terminal));
        assert!(!in_amberd_service("0::/amberd.service.d\n"));
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(u32::MAX));
    }

    #[test]
    fn uptimes() {
        assert_eq!(uptime(999), "0s");
        assert_eq!(uptime(65_000), "1m 05s");
        assert_eq!(uptime(3_700_000), "1h 01m");
        assert_eq!(uptime(90_000_000), "1d 1h");
    }

    #[test]
    fn status_lines() {
        let s = DaemonStatus {
            version: "0.1.0".into(),
            pid: 42,
            uptime_ms: 5000,
            sessions: 2,
            connections: 1,
            sessions_loaded: None,
            provider: None,
            sandbox: None,
            config_error: None,
            autostarted: None,
            busy: None,
            environments: Vec::new(),
            executor_listener: None,
            budget: Vec::new(),
        };
        assert_eq!(
            status_text(&s, "amberd", "/tmp/a.sock"),
            "amberd 0.1.0\npid          42\nsocket       /tmp/a.sock\nuptime       5s\nsessions     2\nconnections  1"
        );
        let s = DaemonStatus {
            provider: Some(amber_proto::ProviderStatus {
                base_url: Some("http://127.0.0.1:8080/v1".into()),
                model: "qwen".into(),
                key_set: false,
                flavor: None,
            }),
            config_error: Some("invalid config file c.toml: expected `=`".into()),
            ..s
        };
        let text = status_text(&s, "amberd", "/tmp/a.sock");
        assert!(
            text.ends_with(
                "\nprovider     http://127.0.0.1:8080/v1 · qwen · no key\nconfig       not reloaded \
                 (the last good one is in force): invalid config file c.toml: expected `=`"
            ),
            "{text}"
        );
    }
}
