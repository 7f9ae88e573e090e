//! What `session/new {environment}` names, and how amberd reaches it: the command that
//! starts an executor there (`amber-exec --stdio`, through `ssh` for another machine) and the
//! one that attaches again to a running one (`--attach ID`).

use std::path::PathBuf;

use serde::Deserialize;

/// `[environments.NAME]`: an executor the config names (`executor:NAME`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvironmentConfig {
    /// Reach it over SSH: a host, `user@host`, or a `Host` of the user's ssh config. Absent:
    /// an executor on this machine.
    pub ssh: Option<String>,
    /// The SSH port, when not the ssh config's.
    pub port: Option<u16>,
    /// The executor program there (default: `amber-exec`, looked up in `~/.local/bin` and
    /// then `PATH`; on this machine, the one installed beside amberd).
    pub program: Option<String>,
    /// The workspace there when `session/new` gives no `cwd`.
    pub path: Option<String>,
    /// Seconds the executor keeps running with no amberd attached (default 600): how long a
    /// dropped link or a restarted amberd may take to attach again.
    pub linger_secs: Option<u64>,
    /// Seconds amberd keeps trying to attach again after the link dropped (default 120),
    /// before it gives the executor up.
    pub reconnect_secs: Option<u64>,
    /// The executor dials in (`amber-exec --connect`) to amberd's executor listener
    /// (`[executors] listen`) instead of being started by amberd.
    pub dial_in: bool,
    /// With `dial_in`: the file holding the bearer token this executor must present.
    pub token_file: Option<PathBuf>,
    /// Start the executor with `--sandbox-in-place`: where no namespace can be made (an
    /// unprivileged container), its commands are sandboxed by Landlock and seccomp alone
    /// instead of refused (docs/security.md, "Without namespaces"). An executor that dials
    /// in is given the flag on its own command line.
    pub sandbox_in_place: bool,
}

/// `[executors]`: amberd's listener for executors that dial in. Off unless `listen` is set;
/// TLS always (`tls_cert` and `tls_key`, PEM).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorsConfig {
    /// `HOST:PORT` to listen on (`127.0.0.1:7443`, `0.0.0.0:7443`).
    pub listen: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

impl ExecutorsConfig {
    /// A listener without TLS is refused: the token would cross the network in the clear.
    pub fn check(&self) -> Result<(), String> {
        if self.listen.is_some() && (self.tls_cert.is_none() || self.tls_key.is_none()) {
            return Err(
                "[executors] listen needs tls_cert and tls_key: executors dial in over TLS only"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

/// The default linger of an executor.
pub const DEFAULT_LINGER_SECS: u64 = 600;
/// How long amberd tries to attach again by default.
pub const DEFAULT_RECONNECT_SECS: u64 = 120;

/// A parsed `environment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// This machine, in amberd's own process (the default).
    Local,
    /// `ssh://[user@]host[:port][/path]`.
    Ssh {
        destination: String,
        port: Option<u16>,
        path: Option<String>,
    },
    /// `executor:NAME`.
    Named(String),
    /// `fleet`: whichever runner of the fleet takes it (docs/fleet.md).
    Fleet,
}

impl Target {
    /// Parses `environment`; absent, empty or `local` is [`Target::Local`].
    pub fn parse(environment: Option<&str>) -> Result<Target, String> {
        let text = environment.map(str::trim).unwrap_or("");
        if text.is_empty() || text == "local" {
            return Ok(Target::Local);
        }
        if text == "fleet" {
            return Ok(Target::Fleet);
        }
        if let Some(name) = text.strip_prefix("executor:") {
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            {
                return Err(format!(
                    "`{text}`: an executor's name is letters, digits, `-`, `_` and `.`"
                ));
            }
            return Ok(Target::Named(name.to_owned()));
        }
        if text.starts_with("ssh://") {
            return parse_ssh(text);
        }
        Err(format!(
            "`{text}` is not an environment: use `local`, `ssh://HOST/PATH`, `executor:NAME` or `fleet`"
        ))
    }

    pub fn is_local(&self) -> bool {
        *self == Target::Local
    }
}

fn parse_ssh(text: &str) -> Result<Target, String> {
    let url = url::Url::parse(text).map_err(|e| format!("`{text}`: {e}"))?;
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("`{text}` names no host"))?;
    let destination = match url.username() {
        "" => host.to_owned(),
        user => format!("{user}@{host}"),
    };
    check_destination(&destination)?;
    if url.password().is_some() {
        return Err(format!(
            "`{text}` holds a password: amber reaches hosts with the user's ssh keys and agent"
        ));
    }
    let path = match url.path() {
        "" | "/" => None,
        path => {
            Some(percent_decode(path).ok_or_else(|| format!("`{text}`: the path is not UTF-8"))?)
        }
    };
    Ok(Target::Ssh {
        destination,
        port: url.port(),
        path,
    })
}

/// A destination `ssh` cannot take for an option, with nothing a shell would read.
fn check_destination(destination: &str) -> Result<(), String> {
    let fine = !destination.starts_with('-')
        && destination
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@[]:%".contains(&b));
    if fine {
        Ok(())
    } else {
        Err(format!("`{destination}` is not a host ssh can be given"))
    }
}

fn percent_decode(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = path.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// How amberd starts and attaches to one environment's executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// `ssh … destination` before the remote command, or nothing for this machine.
    ssh: Option<Vec<String>>,
    /// The executor program.
    program: String,
    linger_secs: u64,
    /// The workspace when the session gives none.
    pub default_path: Option<String>,
    /// How long to try attaching again after the link dropped.
    pub reconnect: std::time::Duration,
    /// The name an executor that dials in goes by (`dial_in`).
    dial_in: Option<String>,
    /// `sandbox_in_place`.
    in_place: bool,
    /// How long a new session waits for its executor to dial in.
    pub dial_wait: std::time::Duration,
    /// The arrival hooks run on the first executor too (a fleet session's setup).
    pub hooks_on_first: bool,
}

/// How long a new session waits for an executor that dials in.
const DIAL_IN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a fleet session's call waits for a runner to take it: as long as it is queued.
const FLEET_WAIT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

impl Launch {
    /// How to reach `target`; `named` resolves `executor:NAME` in the config.
    pub fn of(
        target: &Target,
        named: &std::collections::BTreeMap<String, EnvironmentConfig>,
    ) -> Result<Launch, String> {
        match target {
            Target::Local => Err("a local session runs its tools in amberd".to_owned()),
            Target::Fleet => Err("a fleet session's runner is the fleet's to choose".to_owned()),
            Target::Ssh {
                destination,
                port,
                path,
            } => Ok(Launch {
                ssh: Some(ssh_argv(destination, *port)),
                program: REMOTE_DEFAULT.to_owned(),
                linger_secs: DEFAULT_LINGER_SECS,
                default_path: path.clone(),
                reconnect: std::time::Duration::from_secs(DEFAULT_RECONNECT_SECS),
                dial_in: None,
                in_place: false,
                dial_wait: DIAL_IN_WAIT,
                hooks_on_first: false,
            }),
            Target::Named(name) => {
                let config = named.get(name).ok_or_else(|| {
                    format!("no [environments.{name}] in the config for `executor:{name}`")
                })?;
                if config.dial_in {
                    if config.token_file.is_none() {
                        return Err(format!(
                            "[environments.{name}] dials in and names no token_file"
                        ));
                    }
                    return Ok(Launch {
                        ssh: None,
                        program: String::new(),
                        linger_secs: DEFAULT_LINGER_SECS,
                        default_path: config.path.clone(),
                        reconnect: std::time::Duration::from_secs(
                            config.reconnect_secs.unwrap_or(DEFAULT_RECONNECT_SECS),
                        ),
                        dial_in: Some(name.clone()),
                        in_place: config.sandbox_in_place,
                        dial_wait: DIAL_IN_WAIT,
                        hooks_on_first: false,
                    });
                }
                let ssh = match &config.ssh {
                    Some(destination) => {
                        check_destination(destination)
                            .map_err(|e| format!("[environments.{name}] ssh: {e}"))?;
                        Some(ssh_argv(destination, config.port))
                    }
                    None => None,
                };
                let program = match (&config.program, &ssh) {
                    (Some(program), _) => program.clone(),
                    (None, Some(_)) => REMOTE_DEFAULT.to_owned(),
                    (None, None) => local_default().display().to_string(),
                };
                Ok(Launch {
                    ssh,
                    program,
                    linger_secs: config.linger_secs.unwrap_or(DEFAULT_LINGER_SECS),
                    default_path: config.path.clone(),
                    reconnect: std::time::Duration::from_secs(
                        config.reconnect_secs.unwrap_or(DEFAULT_RECONNECT_SECS),
                    ),
                    dial_in: None,
                    in_place: config.sandbox_in_place,
                    dial_wait: DIAL_IN_WAIT,
                    hooks_on_first: false,
                })
            }
        }
    }

    /// A fleet session's: its runner dials in for it (`fleet:SESSION`) once the fleet
    /// assigned it; a drop is attached again within `reconnect`.
    pub fn fleet(session: &str, reconnect: std::time::Duration) -> Launch {
        Launch {
            ssh: None,
            program: String::new(),
            linger_secs: DEFAULT_LINGER_SECS,
            default_path: None,
            reconnect,
            dial_in: Some(super::dial_in::fleet_name(session)),
            in_place: false,
            dial_wait: FLEET_WAIT,
            hooks_on_first: true,
        }
    }

    /// The argv that starts a new executor.
    pub fn start(&self) -> Vec<String> {
        let mut args = vec![
            "--stdio".to_owned(),
            "--linger".to_owned(),
            self.linger_secs.to_string(),
        ];
        if self.in_place {
            args.push("--sandbox-in-place".to_owned());
        }
        self.argv(&args)
    }

    /// The argv that attaches to executor `id` (an id it gave: hex digits and `-`).
    pub fn attach(&self, id: &str) -> Vec<String> {
        self.argv(&["--stdio".to_owned(), "--attach".to_owned(), id.to_owned()])
    }

    fn argv(&self, args: &[String]) -> Vec<String> {
        match &self.ssh {
            None => std::iter::once(self.program.clone())
                .chain(args.iter().cloned())
                .collect(),
            Some(ssh) => {
                // One remote command line, read by the remote user's shell: only the
                // program is the user's text; everything amber adds is plain words.
                let program = if self.program == REMOTE_DEFAULT {
                    format!("PATH=\"$HOME/.local/bin:$PATH\" exec {REMOTE_DEFAULT}")
                } else {
                    format!("exec {}", shell_quote(&self.program))
                };
                let mut argv = ssh.clone();
                argv.push(format!("{program} {}", args.join(" ")));
                argv
            }
        }
    }

    /// The name the executor dials in under, when it does.
    pub fn dial_in(&self) -> Option<&str> {
        self.dial_in.as_deref()
    }
}

/// The executor's name on another machine (`amber-cli exec install` puts it in
/// `~/.local/bin`).
const REMOTE_DEFAULT: &str = "amber-exec";

/// `ssh` with the options a daemon needs: never a password prompt (no one is there to
/// answer), no terminal, and the user's config, agent and known_hosts otherwise.
fn ssh_argv(destination: &str, port: Option<u16>) -> Vec<String> {
    let mut argv = vec![
        "ssh".to_owned(),
        "-T".to_owned(),
        "-o".to_owned(),
        "BatchMode=yes".to_owned(),
        "-o".to_owned(),
        "ServerAliveInterval=15".to_owned(),
    ];
    if let Some(port) = port {
        argv.push("-p".to_owned());
        argv.push(port.to_string());
    }
    argv.push("--".to_owned());
    argv.push(destination.to_owned());
    argv
}

/// The executor beside amberd's own binary, else `amber-exec` on `PATH`.
fn local_default() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("amber-exec")))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("amber-exec"))
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn environments_parse_or_say_what_they_take() {
        let ok: &[(&str, Target)] = &[
            ("", Target::Local),
            ("local", Target::Local),
            ("executor:gpu-1", Target::Named("gpu-1".to_owned())),
            (
                "ssh://build1/src/app",
                Target::Ssh {
                    destination: "build1".to_owned(),
                    port: None,
                    path: Some("/src/app".to_owned()),
                },
            ),
            (
                "ssh://me@build1:2222/src/my%20app",
                Target::Ssh {
                    destination: "me@build1".to_owned(),
                    port: Some(2222),
                    path: Some("/src/my app".to_owned()),
                },
            ),
            (
                "ssh://localhost",
                Target::Ssh {
                    destination: "localhost".to_owned(),
                    port: None,
                    path: None,
                },
            ),
        ];
        for (text, target) in ok {
            assert_eq!(Target::parse(Some(text)).as_ref(), Ok(target), "{text}");
        }
        for bad in [
            "executor:",
            "executor:a/b",
            "ssh://",
            "ssh://me:secret@host/x",
            "ssh://-oProxyCommand=touch%20x/p",
            "docker://x",
        ] {
            assert!(Target::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn launches_run_the_executor_over_ssh_or_here() {
        let ssh = Launch::of(
            &Target::parse(Some("ssh://me@build1:2222/src")).unwrap(),
            &BTreeMap::new(),
        )
        .unwrap();
        let argv = ssh.start();
        assert_eq!(&argv[..2], ["ssh", "-T"]);
        assert!(argv.contains(&"BatchMode=yes".to_owned()));
        let dest = argv.iter().position(|a| a == "me@build1").unwrap();
        assert_eq!(argv[dest - 1], "--", "nothing after -- is an ssh option");
        assert_eq!(argv.len(), dest + 2, "one remote command line");
        assert!(argv[dest + 1].ends_with("amber-exec --stdio --linger 600"));
        assert!(
            ssh.attach("0f-3e")
                .last()
                .unwrap()
                .ends_with("--stdio --attach 0f-3e")
        );
        assert_eq!(ssh.default_path.as_deref(), Some("/src"));

        let mut named = BTreeMap::new();
        named.insert(
            "here".to_owned(),
            EnvironmentConfig {
                program: Some("/opt/amber/amber-exec".to_owned()),
                linger_secs: Some(5),
                ..EnvironmentConfig::default()
            },
        );
        let here = Launch::of(&Target::Named("here".to_owned()), &named).unwrap();
        assert_eq!(
            here.start(),
            ["/opt/amber/amber-exec", "--stdio", "--linger", "5"]
        );
        assert!(Launch::of(&Target::Named("nope".to_owned()), &named).is_err());
        named.insert(
            "container".to_owned(),
            EnvironmentConfig {
                program: Some("/opt/amber/amber-exec".to_owned()),
                sandbox_in_place: true,
                ..EnvironmentConfig::default()
            },
        );
        let container = Launch::of(&Target::Named("container".to_owned()), &named).unwrap();
        assert_eq!(
            container.start(),
            [
                "/opt/amber/amber-exec",
                "--stdio",
                "--linger",
                "600",
                "--sandbox-in-place"
            ]
        );
    }
}
