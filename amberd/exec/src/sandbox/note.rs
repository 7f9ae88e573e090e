//! How a sandbox refusal reads to the model: the error text of a failed write or connect is
//! the kernel's (`Read-only file system`, `Operation not permitted`, `Network is
//! unreachable`), which a model can mistake for a broken machine. [`refusal_note`] finds
//! those errors in a command's output and names them as the sandbox's, with the paths the
//! output names and the way to ask for more.

use std::path::PathBuf;

use amber_proto::{NetworkMode, SandboxInfo, SandboxMode};

/// Messages of a refused write (EROFS, EACCES, EPERM as tools print them).
const WRITE_SIGNS: &[&str] = &[
    "Read-only file system",
    "read-only file system",
    "Errno 30",
    "EROFS",
    // A protected path is a mount point (`mv .git …`), a hard link out of the workspace
    // crosses mounts.
    "Device or resource busy",
    "Invalid cross-device link",
];
/// Messages of a refused permission that may be the sandbox's (also denied writes under
/// Landlock, signals, ptrace).
const PERMISSION_SIGNS: &[&str] = &[
    "Permission denied",
    "Operation not permitted",
    "Errno 13",
    "Errno 1]",
    "EACCES",
    "EPERM",
];
/// Messages of a refused network access.
const NETWORK_SIGNS: &[&str] = &[
    "Network is unreachable",
    "network is unreachable",
    "Errno 101",
    "ENETUNREACH",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Couldn't connect to server",
    "Failed to connect",
    "Address family not supported",
    "Cannot assign requested address",
    "Connection refused",
];

/// Programs whose only work is the network: with the network off, a command that runs one is
/// told so even when the program failed silently (`nc -z`).
const NETWORK_PROGRAMS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "ping",
    "ping6", "dig", "nslookup",
];

/// Words that make a permission error a network one.
const SOCKET_WORDS: &[&str] = &["socket", "Socket", "/dev/tcp/", "/dev/udp/", "connect"];

/// The note to append to a sandboxed command's output when it shows a refusal, or `None`.
/// `hidden`: the paths the sandbox hides (amberd's socket directory); a command or output
/// that names one is told so, whatever its error said.
pub fn refusal_note(
    sandbox: SandboxInfo,
    hidden: &[PathBuf],
    command: &str,
    output: &str,
) -> Option<String> {
    refusal_note_with(sandbox, hidden, false, command, output)
}

/// [`refusal_note`] of a sandbox that may run in place (`SandboxSpec::in_place`): a refused
/// write also names what a sandbox without namespaces cannot allow.
pub fn refusal_note_with(
    sandbox: SandboxInfo,
    hidden: &[PathBuf],
    in_place: bool,
    command: &str,
    output: &str,
) -> Option<String> {
    if sandbox.mode == SandboxMode::Off {
        return None;
    }
    let named_hidden: Vec<String> = hidden
        .iter()
        .map(|p| p.display().to_string())
        .filter(|p| command.contains(p.as_str()) || output.contains(p.as_str()))
        .collect();
    let socket_words = contains_any(output, SOCKET_WORDS);
    let permission = contains_any(output, PERMISSION_SIGNS);
    let signs = contains_any(output, NETWORK_SIGNS) || (permission && socket_words);
    let network = match sandbox.network_mode {
        NetworkMode::On => false,
        NetworkMode::Off => signs || runs_network_program(command),
        // A network program may well succeed through the proxy: only a sign of failure counts.
        NetworkMode::Allowlist => signs,
    };
    let paths = refused_paths(output);
    let write = contains_any(output, WRITE_SIGNS) || !paths.is_empty() || (permission && !network);
    if !write && !network && named_hidden.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !named_hidden.is_empty() {
        parts.push(format!(
            "{} is amberd's own runtime directory and is hidden from sandboxed commands (a command that could reach amberd could approve its own requests); this is never allowed",
            named_hidden.join(", ")
        ));
    }
    if write {
        let whom = match sandbox.mode {
            SandboxMode::ReadOnly => {
                "this session's sandbox is read-only: only the session temp dir ($TMPDIR) is writable"
            }
            _ if in_place => {
                "this session's sandbox lets commands write only inside the workspace, $TMPDIR and the configured writable roots (.git/hooks, .git/config and .amber/ stay read-only); where its executor can make no namespace (an unprivileged container), a command also cannot create, remove or rename entries directly at the top of the workspace or in .git (one level down works)"
            }
            _ => {
                "this session's sandbox lets commands write only inside the workspace, $TMPDIR and the configured writable roots (.git/hooks, .git/config and .amber/ stay read-only)"
            }
        };
        if paths.is_empty() {
            parts.push(format!(
                "a write or privileged operation was refused: {whom}"
            ));
        } else {
            parts.push(format!("writing {} was refused: {whom}", paths.join(", ")));
        }
    }
    if network {
        let targets = network_targets(output);
        let what = if targets.is_empty() {
            "network access was refused".to_owned()
        } else {
            format!("network access to {} was refused", targets.join(", "))
        };
        let why = match sandbox.network_mode {
            NetworkMode::Allowlist => {
                "this session's sandbox reaches the network only through amber's egress proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY name it), and only the hosts its allowlist lets through; a program that ignores those variables reaches nothing, and its own loopback is all it has besides"
            }
            _ => {
                "this session's sandbox has no network (no IP sockets, loopback included, and no Unix sockets)"
            }
        };
        parts.push(format!("{what}: {why}"));
    }
    Some(format!(
        "[sandbox: {}. If the task needs it, call the tool again with `sandbox: false` to ask the user to run it unsandboxed.]",
        parts.join("; ")
    ))
}

fn runs_network_program(command: &str) -> bool {
    command
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .any(|word| NETWORK_PROGRAMS.contains(&word))
}

fn contains_any(text: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| text.contains(n))
}

fn tokens(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '‘' | '’'))
        .map(|t| t.trim_end_matches([':', ',', ';', ')']))
        .filter(|t| !t.is_empty())
}

/// Absolute paths named on the lines that carry a refusal, as shells and tools print them
/// (`bash: /x: Read-only file system`, `touch: cannot touch '/x': …`, `[Errno 30] …: '/x'`);
/// never a `/dev/tcp` pseudo-path (that is a connection).
fn refused_paths(output: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in output.lines() {
        if !contains_any(line, WRITE_SIGNS) && !contains_any(line, PERMISSION_SIGNS)
            || contains_any(line, SOCKET_WORDS)
        {
            continue;
        }
        // `/bin/bash: line 1: …`: the program's name leads the message, it is not the path.
        let skip = usize::from(
            line.split_whitespace()
                .next()
                .is_some_and(|t| t.ends_with(':')),
        );
        for token in tokens(line).skip(skip) {
            if token.starts_with('/')
                && token.len() > 1
                && !token.starts_with("/dev/tcp/")
                && !token.starts_with("/dev/udp/")
                && !paths.iter().any(|p| p == token)
            {
                paths.push(token.to_owned());
            }
        }
        if paths.len() >= 5 {
            break;
        }
    }
    paths
}

/// What a refused connection was for: `/dev/tcp/HOST/PORT`, URLs, IP addresses.
fn network_targets(output: &str) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    for token in output.lines().flat_map(tokens) {
        let target = if let Some(rest) = token
            .strip_prefix("/dev/tcp/")
            .or_else(|| token.strip_prefix("/dev/udp/"))
        {
            rest.replacen('/', ":", 1)
        } else if token.contains("://") || looks_like_ip(token) {
            token.to_owned()
        } else {
            continue;
        };
        if !targets.contains(&target) {
            targets.push(target);
        }
        if targets.len() >= 3 {
            break;
        }
    }
    targets
}

fn looks_like_ip(token: &str) -> bool {
    token.parse::<std::net::IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(network: bool) -> SandboxInfo {
        SandboxInfo::new(SandboxMode::WorkspaceWrite, NetworkMode::from_bool(network))
    }

    #[test]
    fn a_read_only_file_system_error_names_the_path() {
        let note = refusal_note(
            on(false),
            &[],
            "",
            "/bin/bash: line 1: /tmp/sentinel: Read-only file system\n",
        )
        .unwrap();
        assert!(note.contains("writing /tmp/sentinel was refused"), "{note}");
        assert!(note.contains("sandbox: false"), "{note}");
    }

    #[test]
    fn tool_quoting_styles_are_read() {
        let out = "touch: cannot touch '/outside/x': Read-only file system\n\
                   OSError: [Errno 30] Read-only file system: '/outside/y'\n";
        let note = refusal_note(on(false), &[], "", out).unwrap();
        assert!(note.contains("/outside/x, /outside/y"), "{note}");
    }

    #[test]
    fn network_errors_count_only_when_the_network_is_off() {
        let out = "curl: (7) Failed to connect to 127.0.0.1 port 8080: Network is unreachable";
        assert!(
            refusal_note(on(false), &[], "", out)
                .unwrap()
                .contains("network access to 127.0.0.1 was refused")
        );
        assert_eq!(refusal_note(on(true), &[], "", out), None);
    }

    #[test]
    fn an_allowlist_sandbox_names_its_proxy_and_lets_a_working_download_be() {
        let allowlist = SandboxInfo::new(SandboxMode::WorkspaceWrite, NetworkMode::Allowlist);
        let out = "curl: (7) Failed to connect to 10.1.2.3 port 80: Network is unreachable";
        let note =
            refusal_note(allowlist, &[], "curl --noproxy '*' http://10.1.2.3/", out).unwrap();
        assert!(
            note.contains("egress proxy") && note.contains("HTTP_PROXY"),
            "{note}"
        );
        assert!(!note.contains("has no network"), "{note}");
        // Through the proxy, a network program's success says nothing of a refusal.
        assert_eq!(
            refusal_note(
                allowlist,
                &[],
                "curl -s https://crates.io/",
                "{\"ok\":true}"
            ),
            None
        );
        assert!(refusal_note(on(false), &[], "curl -s https://crates.io/", "").is_some());
    }

    #[test]
    fn a_refused_socket_is_a_network_refusal_naming_the_address() {
        let out = "/bin/bash: socket: Operation not permitted\n/bin/bash: line 1: /dev/tcp/127.0.0.1/22: Operation not permitted\n";
        let note = refusal_note(on(false), &[], "", out).unwrap();
        assert!(
            note.contains("network access to 127.0.0.1:22 was refused"),
            "{note}"
        );
        assert!(!note.contains("writing"), "{note}");
    }

    #[test]
    fn a_command_naming_amberds_socket_is_told_it_is_hidden() {
        let hidden = [PathBuf::from("/run/user/0/amber")];
        let note = refusal_note(
            SandboxInfo::new(
                SandboxMode::WorkspaceWrite,
                amber_proto::NetworkMode::from_bool(true),
            ),
            &hidden,
            "curl --unix-socket /run/user/0/amber/amberd.sock http://x/",
            "curl: (7) Couldn't connect to server",
        )
        .unwrap();
        assert!(
            note.contains("/run/user/0/amber is amberd's own runtime directory"),
            "{note}"
        );
    }

    #[test]
    fn a_silent_network_program_is_still_told_the_network_is_off() {
        let note = refusal_note(on(false), &[], "nc -z -w 2 127.0.0.1 8080", "").unwrap();
        assert!(note.contains("network access was refused"), "{note}");
        assert_eq!(
            refusal_note(on(true), &[], "nc -z 127.0.0.1 8080", ""),
            None
        );
        assert_eq!(refusal_note(on(false), &[], "sync && ls", ""), None);
    }

    #[test]
    fn clean_output_and_an_off_sandbox_get_no_note() {
        assert_eq!(refusal_note(on(false), &[], "", "all good\n"), None);
        let off = SandboxInfo::new(SandboxMode::Off, amber_proto::NetworkMode::from_bool(true));
        assert_eq!(refusal_note(off, &[], "", "x: Read-only file system"), None);
    }
}
