//! Approval scopes: one per invoked program, `program` or `program subcommand` for
//! multi-command programs (git, cargo, npm, docker, kubectl, systemctl, apt, pip, go, gh …),
//! skipping their global options (`git -C dir`, `cargo +nightly`, `kubectl -n ns`), with a
//! second level for command groups (`docker compose up`, `gh pr merge`, `kubectl config view`).

use super::words::Word;

/// Programs whose scope includes the subcommand, with their global options taking a value.
#[rustfmt::skip]
const MULTI: &[(&str, &[&str])] = &[
    ("git", &["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"]),
    ("cargo", &["-C", "--config", "-Z", "--color"]),
    ("npm", &["--prefix", "-w", "--workspace"]),
    ("pnpm", &["-C", "--dir", "--filter", "-F"]),
    ("yarn", &["--cwd"]), ("bun", &["--cwd"]), ("go", &["-C"]),
    ("docker", DOCKER_GLOBAL), ("podman", DOCKER_GLOBAL),
    ("kubectl", &["-n", "--namespace", "--context", "--cluster", "--user", "-s", "--server",
                  "--kubeconfig"]),
    ("helm", &["-n", "--namespace", "--kube-context", "--kubeconfig"]),
    ("systemctl", &["-H", "--host", "-M", "--machine", "-t", "--type", "-p", "--property",
                    "-n", "--lines", "-s", "--signal"]),
    ("apt", &["-o", "-c", "-t"]), ("apt-get", &["-o", "-c", "-t"]),
    ("dnf", &[]), ("yum", &[]), ("brew", &[]), ("pip", &[]), ("pip3", &[]),
    ("uv", &["--directory", "--project"]), ("poetry", &[]), ("pdm", &[]), ("rustup", &[]),
    ("gh", &["-R", "--repo"]), ("terraform", &[]), ("npx", &["-p", "--package"]),
    ("pnpx", &[]), ("bunx", &[]), ("snap", &[]), ("flatpak", &[]),
];

#[rustfmt::skip]
const DOCKER_GLOBAL: &[&str] = &[
    "-H", "--host", "--context", "-c", "--config", "-l", "--log-level",
];
#[rustfmt::skip]
const DOCKER_GROUPS: &[&str] = &[
    "container", "image", "network", "volume", "system", "builder", "buildx", "compose", "context",
    "plugin", "swarm", "node", "service", "stack", "secret", "config",
];

/// The first non-option word after the program's global options: (index, text).
pub(super) fn subcommand<'a>(args: &'a [Word], valued: &[&str]) -> Option<(usize, &'a str)> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let text = arg.text()?;
        if text == "--" {
            return None;
        }
        if text.starts_with('+') || (text.starts_with('-') && text.len() > 1) {
            i += if valued.contains(&text) { 2 } else { 1 };
            continue;
        }
        return Some((i, text));
    }
    None
}

fn global_options(name: &str) -> Option<&'static [&'static str]> {
    MULTI.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// Two-level subcommands: `docker compose up`, `gh pr merge`, `kubectl config view`.
fn nested(name: &str, sub: &str) -> bool {
    match name {
        "docker" | "podman" => DOCKER_GROUPS.contains(&sub),
        "gh" => sub != "api" && sub != "status",
        "kubectl" => matches!(sub, "config" | "rollout" | "auth"),
        "rustup" => matches!(sub, "toolchain" | "target" | "component"),
        "terraform" => matches!(sub, "state" | "workspace"),
        _ => false,
    }
}

/// The subcommand key: `sub` or `sub sub2`, and the arguments after it.
pub(super) fn key<'a>(name: &str, args: &'a [Word]) -> Option<(String, &'a [Word])> {
    let valued = global_options(name)?;
    let (i, sub) = subcommand(args, valued)?;
    let rest = args.get(i + 1..).unwrap_or_default();
    if nested(name, sub)
        && let Some((j, sub2)) = subcommand(rest, &[])
    {
        return Some((
            format!("{sub} {sub2}"),
            rest.get(j + 1..).unwrap_or_default(),
        ));
    }
    Some((sub.to_owned(), rest))
}

/// The approval scope of an invocation: `program` or `program subcommand`.
pub(super) fn scope(name: &str, args: &[Word]) -> String {
    match key(name, args) {
        Some((key, _)) => format!("{name} {key}"),
        None => name.to_owned(),
    }
}
