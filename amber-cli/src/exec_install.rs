//! `amber-cli exec install HOST`: puts this machine's `amber-exec` on HOST over the user's own
//! `ssh` (config, keys, agent, known_hosts), in `~/.local/bin/amber-exec` — the first place
//! amberd looks for it there — and checks it runs there and reports the same version. Nothing
//! else of amber is copied. A host that already has this version is left alone (`--force`
//! copies anyway); a host of another OS or architecture is refused before anything is copied.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::turn::exit;

/// Where the executor goes on the host (relative to its home).
const REMOTE_PATH: &str = ".local/bin/amber-exec";

/// What `exec install` was asked.
pub(crate) struct Install {
    pub host: String,
    pub port: Option<u16>,
    pub program: Option<PathBuf>,
    pub force: bool,
}

pub(crate) fn install(args: Install) -> anyhow::Result<u8> {
    let (destination, port) = destination(&args.host, args.port)?;
    let local = match args.program {
        Some(path) => path,
        None => beside_this_binary("amber-exec")?,
    };
    let version = local_version(&local)?;
    let target = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    let remote_target = ssh_output(&destination, port, "uname -sm", None)?;
    if !same_target(&remote_target, &target) {
        bail!(
            "{destination} is `{}`, this amber-exec is for `{target}`: give the matching \
             release's amber-exec with --program",
            remote_target.trim()
        );
    }
    let installed = ssh_output(
        &destination,
        port,
        &format!("\"$HOME/{REMOTE_PATH}\" --version 2>/dev/null || true"),
        None,
    )?;
    if installed.trim() == version && !args.force {
        println!("{version} is already on {destination} (~/{REMOTE_PATH})");
        return Ok(exit::OK);
    }
    let bytes =
        std::fs::read(&local).with_context(|| format!("cannot read {}", local.display()))?;
    ssh_output(
        &destination,
        port,
        &format!(
            "set -e; mkdir -p \"$HOME/.local/bin\"; tmp=\"$HOME/.local/bin/.amber-exec.$$\"; \
             cat > \"$tmp\"; chmod 755 \"$tmp\"; mv -f \"$tmp\" \"$HOME/{REMOTE_PATH}\""
        ),
        Some(&bytes),
    )?;
    let now = ssh_output(
        &destination,
        port,
        &format!("\"$HOME/{REMOTE_PATH}\" --version"),
        None,
    )?;
    if now.trim() != version {
        bail!(
            "copied, but ~/{REMOTE_PATH} on {destination} reports `{}`, not `{version}`",
            now.trim()
        );
    }
    println!("installed {version} on {destination} in ~/{REMOTE_PATH}");
    Ok(exit::OK)
}

/// `HOST`, `user@host` or `ssh://[user@]host[:port]`, checked so that `ssh` cannot take it for
/// an option.
fn destination(host: &str, port: Option<u16>) -> anyhow::Result<(String, Option<u16>)> {
    let (destination, url_port) = match host.strip_prefix("ssh://") {
        Some(rest) => {
            let authority = rest.split('/').next().unwrap_or_default();
            match authority.rsplit_once(':') {
                Some((host, p)) if !host.ends_with(']') || authority.starts_with('[') => {
                    let p: u16 = p.parse().with_context(|| format!("`{p}` is not a port"))?;
                    (host.to_owned(), Some(p))
                }
                _ => (authority.to_owned(), None),
            }
        }
        None => (host.to_owned(), None),
    };
    let fine = !destination.is_empty()
        && !destination.starts_with('-')
        && destination
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@[]:%".contains(&b));
    if !fine {
        bail!("`{host}` is not a host ssh can be given");
    }
    Ok((destination, port.or(url_port)))
}

fn same_target(remote: &str, local: &str) -> bool {
    let remote: Vec<&str> = remote.split_whitespace().collect();
    let local: Vec<&str> = local.split_whitespace().collect();
    remote.len() == 2
        && local.len() == 2
        && remote[0].eq_ignore_ascii_case(local[0])
        && (remote[1] == local[1] || (remote[1] == "arm64" && local[1] == "aarch64"))
}

fn beside_this_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this binary")?;
    let path = exe
        .parent()
        .map(|dir| dir.join(name))
        .filter(|path| path.is_file())
        .with_context(|| {
            format!(
                "no {name} beside {}: give its path with --program",
                exe.display()
            )
        })?;
    Ok(path)
}

fn local_version(program: &Path) -> anyhow::Result<String> {
    let out = Command::new(program)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {}", program.display()))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || !version.starts_with("amber-exec ") {
        bail!("{} is not an amber-exec", program.display());
    }
    Ok(version)
}

/// Runs `command` on the host through `ssh` (no prompt: `BatchMode`), with `stdin` as its
/// input; its stdout, or ssh's complaint.
fn ssh_output(
    destination: &str,
    port: Option<u16>,
    command: &str,
    stdin: Option<&[u8]>,
) -> anyhow::Result<String> {
    let mut ssh = Command::new("ssh");
    ssh.args(["-T", "-o", "BatchMode=yes"]);
    if let Some(port) = port {
        ssh.arg("-p").arg(port.to_string());
    }
    ssh.arg("--").arg(destination).arg(command);
    ssh.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = ssh.spawn().context("cannot run ssh")?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)
            .context("cannot send the file over ssh")?;
    }
    let out = child.wait_with_output().context("ssh failed")?;
    if !out.status.success() {
        bail!(
            "ssh {destination}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_as_ssh_takes_them_or_refused() {
        // (given, --port, read as)
        type Case<'a> = (&'a str, Option<u16>, (&'a str, Option<u16>));
        let ok: &[Case<'_>] = &[
            ("build1", None, ("build1", None)),
            ("me@build1", Some(2222), ("me@build1", Some(2222))),
            ("ssh://me@build1:2200", None, ("me@build1", Some(2200))),
            ("ssh://build1/src/app", None, ("build1", None)),
        ];
        for (host, port, (dest, want_port)) in ok {
            let got = destination(host, *port).unwrap();
            assert_eq!((got.0.as_str(), got.1), (*dest, *want_port), "{host}");
        }
        for bad in ["-oProxyCommand=x", "a b", "ssh://", "host;rm"] {
            assert!(destination(bad, None).is_err(), "{bad}");
        }
        assert!(same_target("Linux x86_64\n", "linux x86_64"));
        assert!(!same_target("Linux aarch64", "linux x86_64"));
        assert!(!same_target("Darwin x86_64", "linux x86_64"));
    }
}
