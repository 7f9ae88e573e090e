//! How a sandbox refusal reads to the model: the error text of a failed write or connect is
//! the kernel's (`Read-only file system`, `Operation not permitted`, `Network is
//! unreachable`), which a model can mistake for a broken machine. [`refusal_note`] finds
//! those errors in a command's output and names them as the sandbox's, with the paths the
//! output names and the way to ask for more.

use amber_proto::{SandboxInfo, SandboxMode};

/// Messages of a refused write (EROFS, EACCES, EPERM as tools print them).
const WRITE_SIGNS: &[&str] = &[
    "Read-only file system",
    "read-only file system",
    "Errno 30",
    "EROFS",
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

/// The note to append to a sandboxed command's output when it shows a refusal, or `None`.
pub fn refusal_note(sandbox: SandboxInfo, output: &str) -> Option<String> {
    if sandbox.mode == SandboxMode::Off {
        return None;
    }
    let write = contains_any(output, WRITE_SIGNS);
    let permission = contains_any(output, PERMISSION_SIGNS);
    let network = !sandbox.network && contains_any(output, NETWORK_SIGNS);
    if !write && !permission && !network {
        return None;
    }
    let mut parts = Vec::new();
    if write || permission {
        let paths = refused_paths(output);
        let whom = match sandbox.mode {
            SandboxMode::ReadOnly => "this session's sandbox is read-only: only the session temp dir ($TMPDIR) is writable",
            _ => "this session's sandbox lets commands write only inside the workspace, $TMPDIR and the configured writable roots (.git/hooks, .git/config and .amber/ stay read-only)",
        };
        if paths.is_empty() {
            parts.push(format!("a write or privileged operation was refused: {whom}"));
        } else {
            parts.push(format!(
                "writing {} was refused: {whom}",
                paths.join(", ")
            ));
        }
    }
    if network {
        parts.push(
            "network access was refused: this session's sandbox has no network (no IP sockets, loopback included, and no Unix sockets)"
                .to_owned(),
        );
    }
    Some(format!(
        "[sandbox: {}. If the task needs it, call the tool again with `sandbox: false` to ask the user to run it unsandboxed.]",
        parts.join("; ")
    ))
}

fn contains_any(text: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| text.contains(n))
}

/// Absolute paths named on the lines that carry a refusal, as shells and tools print them
/// (`bash: /x: Read-only file system`, `touch: cannot touch '/x': …`, `[Errno 30] …: '/x'`).
fn refused_paths(output: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in output.lines() {
        if !contains_any(line, WRITE_SIGNS) && !contains_any(line, PERMISSION_SIGNS) {
            continue;
        }
        for token in line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '‘' | '’')) {
            let token = token.trim_end_matches([':', ',', ';', ')']);
            if token.starts_with('/') && token.len() > 1 && !paths.iter().any(|p| p == token) {
                paths.push(token.to_owned());
            }
        }
        if paths.len() >= 5 {
            break;
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(network: bool) -> SandboxInfo {
        SandboxInfo {
            mode: SandboxMode::WorkspaceWrite,
            network,
        }
    }

    #[test]
    fn a_read_only_file_system_error_names_the_path() {
        let note = refusal_note(on(false), "bash: /tmp/sentinel: Read-only file system\n").unwrap();
        assert!(note.contains("writing /tmp/sentinel was refused"), "{note}");
        assert!(note.contains("sandbox: false"), "{note}");
    }

    #[test]
    fn tool_quoting_styles_are_read() {
        let out = "touch: cannot touch '/outside/x': Read-only file system\n\
                   OSError: [Errno 30] Read-only file system: '/outside/y'\n";
        let note = refusal_note(on(false), out).unwrap();
        assert!(note.contains("/outside/x, /outside/y"), "{note}");
    }

    #[test]
    fn network_errors_count_only_when_the_network_is_off() {
        let out = "curl: (7) Failed to connect to 127.0.0.1 port 8080: Network is unreachable";
        assert!(refusal_note(on(false), out).unwrap().contains("network access was refused"));
        assert_eq!(refusal_note(on(true), out), None);
    }

    #[test]
    fn clean_output_and_an_off_sandbox_get_no_note() {
        assert_eq!(refusal_note(on(false), "all good\n"), None);
        let off = SandboxInfo {
            mode: SandboxMode::Off,
            network: true,
        };
        assert_eq!(refusal_note(off, "x: Read-only file system"), None);
    }
}
