//! Multi-command programs (other than git): approval scopes (`program subcommand`) and
//! their subcommand tables.
//!
//! Decisions:
//! - cargo: build/check/test/clippy/fmt/run/doc/bench/add/update/clean … benign (they run
//!   build scripts and tests, but only write the workspace and `target/`); `tree`/`metadata`
//!   and `fmt --check` read-only; `publish`/`yank`/`owner` destructive; `install` writes
//!   `~/.cargo/bin` → destructive, outside. Unknown subcommands (plugins) unknown.
//! - npm/pnpm/yarn/bun: `test`/`run`/`build` … benign; `install`/`i`/`ci`/`add`/`update`
//!   (and bare `yarn`) unknown: packages run their lifecycle scripts, so they ask;
//!   listing read-only; `publish`/`unpublish`/`deprecate` destructive; `-g`/`--global`
//!   destructive, outside; `exec`/`dlx`/`npx` unknown (fetch and run packages). For pnpm,
//!   yarn and bun an unlisted subcommand runs a package.json script: benign.
//! - go: build/test/vet/fmt/run/generate/get/mod benign; `install`, `env -w`,
//!   `clean -modcache` destructive, outside.
//! - pip: listing read-only; `install`/`uninstall` unknown (the target environment may be
//!   the system's); uv/poetry/pdm project commands benign, `publish` destructive.
//! - docker/podman, kubectl, helm, systemctl, apt/dnf/brew, gh, terraform: inspection
//!   read-only; removal/publishing (`rm`, `rmi`, `system prune`, `push`, `compose down`,
//!   `kubectl delete`, `systemctl stop`, `apt remove`, `gh pr merge`, `terraform apply` …)
//!   destructive; `docker build`/`pull` benign; everything else (run, start, install …) unknown.

use super::ShellClass;
use super::rules::{Verdict, has_flag, literals};
use super::scope::{key, subcommand};
use super::words::Word;

struct Table {
    read: &'static [&'static str],
    benign: &'static [&'static str],
    destructive: &'static [&'static str],
    /// Writes outside the workspace (global installs).
    outside: &'static [&'static str],
    /// For unlisted subcommands.
    other: (ShellClass, &'static str),
}

impl Table {
    fn verdict<'a>(&self, key: &str, scope: &str) -> Verdict<'a> {
        if self.read.contains(&key) {
            Verdict::new(ShellClass::ReadOnly, scope, "read-only")
        } else if self.benign.contains(&key) {
            Verdict::new(ShellClass::Benign, scope, "works inside the project")
        } else if self.destructive.contains(&key) {
            Verdict::new(
                ShellClass::Destructive,
                scope,
                "removes, stops or publishes",
            )
        } else if self.outside.contains(&key) {
            Verdict::new(
                ShellClass::Destructive,
                scope,
                "installs outside the workspace",
            )
            .outside()
        } else {
            Verdict::new(self.other.0, scope, self.other.1)
        }
    }
}

const UNKNOWN_SUB: (ShellClass, &str) = (ShellClass::Unknown, "subcommand not known");

#[rustfmt::skip]
const CARGO: Table = Table {
    read: &[
        "tree", "metadata", "search", "version", "help", "locate-project", "pkgid",
        "verify-project", "read-manifest", "info",
    ],
    benign: &[
        "build", "b", "check", "c", "test", "t", "bench", "run", "r", "doc", "d", "clippy", "fmt",
        "fix", "nextest", "update", "add", "remove", "rm", "clean", "new", "init",
        "generate-lockfile", "fetch", "vendor", "package", "expand", "llvm-cov", "insta", "machete",
        "deny", "audit", "miri", "udeps", "outdated", "hack", "semver-checks",
    ],
    destructive: &["publish", "yank", "owner"],
    outside: &["install", "uninstall"],
    other: UNKNOWN_SUB,
};

#[rustfmt::skip]
const JS_READ: &[&str] = &[
    "ls", "list", "la", "ll", "outdated", "view", "v", "info", "show", "why", "explain", "search",
    "help", "doctor", "ping", "prefix", "root", "bin", "whoami", "query", "fund", "licenses",
];
#[rustfmt::skip]
const JS_BENIGN: &[&str] = &[
    "test", "t", "tst", "run", "run-script", "start", "stop", "restart", "build", "uninstall",
    "un", "remove", "rm", "dedupe", "prune", "init", "create", "pack", "version", "rebuild", "lint",
    "format", "dev", "typecheck", "audit", "pm",
];
/// Subcommands that fetch packages and run their lifecycle scripts (`postinstall` …).
#[rustfmt::skip]
const JS_INSTALL: &[&str] = &[
    "install", "i", "in", "isntall", "add", "ci", "clean-install", "update", "up", "upgrade",
    "install-test", "it", "install-ci-test",
];
#[rustfmt::skip]
const JS_DESTRUCTIVE: &[&str] = &[
    "publish", "unpublish", "deprecate", "dist-tag", "owner", "access", "token",
];

#[rustfmt::skip]
const GO: Table = Table {
    read: &["version", "env", "list", "doc", "help"],
    benign: &[
        "build", "test", "vet", "fmt", "run", "generate", "get", "mod", "work", "clean", "fix",
    ],
    destructive: &[],
    outside: &["install"],
    other: UNKNOWN_SUB,
};

#[rustfmt::skip]
const PIP: Table = Table {
    read: &["list", "show", "freeze", "check", "search", "index", "help", "debug", "inspect"],
    benign: &["download", "wheel", "hash"],
    destructive: &[],
    outside: &[],
    other: (ShellClass::Unknown, "changes a Python environment"),
};

#[rustfmt::skip]
const PY_PROJECT: Table = Table {
    read: &["tree", "version", "help", "show", "check", "about", "list", "info"],
    benign: &[
        "venv", "sync", "lock", "add", "remove", "init", "new", "build", "export", "format",
        "install", "update",
    ],
    destructive: &["publish"],
    outside: &[],
    other: UNKNOWN_SUB,
};

#[rustfmt::skip]
const DOCKER: Table = Table {
    read: &[
        "ps", "images", "logs", "inspect", "version", "info", "history", "top", "stats", "port",
        "diff", "search", "events", "help", "container ls", "container list", "container ps",
        "container inspect", "container logs", "container top", "container port", "container diff",
        "container stats", "image ls", "image list", "image inspect", "image history", "network ls",
        "network list", "network inspect", "volume ls", "volume list", "volume inspect",
        "context ls", "context list", "context show", "context inspect", "compose ps",
        "compose logs", "compose config", "compose ls", "compose images", "compose top",
        "compose version", "system df", "system info", "buildx ls", "buildx inspect", "plugin ls",
    ],
    benign: &[
        "build", "image build", "buildx build", "compose build", "pull", "image pull",
        "compose pull", "tag", "image tag",
    ],
    destructive: &[
        "rm", "rmi", "kill", "push", "image push", "system prune", "image prune", "image rm",
        "container prune", "container rm", "container kill", "volume rm", "volume prune",
        "network rm", "network prune", "builder prune", "buildx prune", "buildx rm", "compose down",
        "compose rm", "compose kill", "context rm", "plugin rm",
    ],
    outside: &[],
    other: (ShellClass::Unknown, "changes containers"),
};

#[rustfmt::skip]
const KUBECTL: Table = Table {
    read: &[
        "get", "describe", "logs", "explain", "version", "api-resources", "api-versions",
        "cluster-info", "top", "diff", "events", "config view", "config get-contexts",
        "config current-context", "config get-clusters", "config get-users", "auth can-i",
        "auth whoami", "rollout status", "rollout history",
    ],
    benign: &[],
    destructive: &["delete", "drain"],
    outside: &[],
    other: (ShellClass::Unknown, "changes the cluster"),
};

#[rustfmt::skip]
const HELM: Table = Table {
    read: &[
        "list", "ls", "status", "get", "history", "template", "show", "search", "version", "env",
        "lint",
    ],
    benign: &[],
    destructive: &["uninstall", "delete", "del", "un"],
    outside: &[],
    other: (ShellClass::Unknown, "changes the cluster"),
};

#[rustfmt::skip]
const SYSTEMCTL: Table = Table {
    read: &[
        "status", "show", "cat", "list-units", "list-unit-files", "list-sockets", "list-timers",
        "list-jobs", "list-dependencies", "is-active", "is-enabled", "is-failed",
        "is-system-running", "get-default", "help", "show-environment",
    ],
    benign: &[],
    destructive: &[
        "stop", "disable", "mask", "kill", "poweroff", "reboot", "halt", "suspend", "hibernate",
        "isolate", "emergency", "rescue", "kexec",
    ],
    outside: &[],
    other: (ShellClass::Unknown, "changes system services"),
};

#[rustfmt::skip]
const PACKAGES: Table = Table {
    read: &[
        "list", "ls", "search", "show", "policy", "depends", "rdepends", "showsrc", "changelog",
        "info", "check-update", "deps", "uses", "outdated", "config", "doctor", "leaves", "desc",
    ],
    benign: &[],
    destructive: &[
        "remove", "purge", "autoremove", "autopurge", "erase", "uninstall", "rm", "cleanup",
        "untap",
    ],
    outside: &[],
    other: (ShellClass::Unknown, "changes system packages"),
};

#[rustfmt::skip]
const RUSTUP: Table = Table {
    read: &["show", "which", "help", "toolchain list", "target list", "component list"],
    benign: &[],
    destructive: &[],
    outside: &[],
    other: (ShellClass::Unknown, "changes the Rust toolchain"),
};

#[rustfmt::skip]
const GH: Table = Table {
    read: &[
        "pr view", "pr list", "pr status", "pr diff", "pr checks", "issue view", "issue list",
        "issue status", "run view", "run list", "run watch", "repo view", "repo list",
        "release view", "release list", "workflow list", "workflow view", "auth status", "status",
        "cache list", "label list", "gist list", "gist view", "search repos", "search issues",
        "search prs", "search code",
    ],
    benign: &["repo clone", "pr checkout"],
    destructive: &[
        "repo delete", "release delete", "pr merge", "issue delete", "secret delete", "run delete",
        "cache delete", "repo archive", "gist delete", "ssh-key delete", "gpg-key delete",
        "label delete", "variable delete",
    ],
    outside: &[],
    other: (ShellClass::Unknown, "changes GitHub"),
};

#[rustfmt::skip]
const TERRAFORM: Table = Table {
    read: &[
        "plan", "validate", "show", "output", "version", "providers", "graph", "state list",
        "state show", "workspace list", "workspace show",
    ],
    benign: &["init", "fmt", "get"],
    destructive: &[
        "apply", "destroy", "import", "taint", "state rm", "state mv", "state push", "force-unlock",
        "workspace delete",
    ],
    outside: &[],
    other: UNKNOWN_SUB,
};

#[rustfmt::skip]
const VERSION_FLAGS: &[&str] = &["--version", "-V", "-v", "--help", "-h", "--list"];

/// Multi-command programs (git excluded); `None` when `name` is not one.
pub(super) fn classify<'a>(name: &str, args: &'a [Word], scope: &str) -> Option<Verdict<'a>> {
    let table = match name {
        "cargo" => &CARGO,
        "go" => &GO,
        "pip" | "pip3" => return Some(pip(name, args)),
        "uv" | "poetry" | "pdm" => {
            if let Some(("pip", rest)) = key(name, args).as_ref().map(|(k, r)| (k.as_str(), *r)) {
                return Some(pip("uv pip", rest));
            }
            &PY_PROJECT
        }
        "docker" | "podman" => &DOCKER,
        "kubectl" => &KUBECTL,
        "helm" => &HELM,
        "systemctl" => &SYSTEMCTL,
        "apt" | "apt-get" | "dnf" | "yum" | "brew" => &PACKAGES,
        "rustup" => &RUSTUP,
        "gh" => &GH,
        "terraform" => &TERRAFORM,
        "npm" | "pnpm" | "yarn" | "bun" => return Some(js(name, args, scope)),
        "npx" | "pnpx" | "bunx" => {
            return Some(Verdict::new(
                ShellClass::Unknown,
                scope,
                "fetches and runs a package",
            ));
        }
        "apt-cache" => return Some(Verdict::new(ShellClass::ReadOnly, scope, "read-only")),
        "journalctl" => {
            let vacuum = ["--vacuum-size", "--vacuum-time", "--vacuum-files"];
            return Some(if has_flag(args, &[], &vacuum) {
                Verdict::new(ShellClass::Destructive, scope, "deletes logs")
            } else if has_flag(
                args,
                &[],
                &[
                    "--rotate",
                    "--flush",
                    "--sync",
                    "--relinquish-var",
                    "--setup-keys",
                ],
            ) {
                Verdict::new(ShellClass::Unknown, scope, "changes the journal")
            } else {
                Verdict::new(ShellClass::ReadOnly, scope, "read-only")
            });
        }
        _ => return None,
    };
    let Some((key, rest)) = key(name, args) else {
        return Some(no_subcommand(args, scope));
    };
    let lits = literals(rest).unwrap_or_default();
    let special = match (name, key.as_str()) {
        ("cargo", "fmt") if lits.contains(&"--check") => Some(Verdict::new(
            ShellClass::ReadOnly,
            scope,
            "checks formatting",
        )),
        ("go", "env") if lits.iter().any(|t| matches!(*t, "-w" | "-u")) => {
            Some(Verdict::new(ShellClass::Destructive, scope, "writes the user's go env").outside())
        }
        ("go", "clean")
            if lits
                .iter()
                .any(|t| matches!(*t, "-cache" | "-modcache" | "-testcache" | "-fuzzcache")) =>
        {
            Some(Verdict::new(ShellClass::Destructive, scope, "deletes user caches").outside())
        }
        ("terraform", "fmt") if lits.contains(&"-check") => Some(Verdict::new(
            ShellClass::ReadOnly,
            scope,
            "checks formatting",
        )),
        ("gh", "api") => {
            let writes = has_flag(
                rest,
                &['X', 'f', 'F'],
                &["--method", "--field", "--raw-field", "--input"],
            );
            Some(if writes {
                Verdict::new(ShellClass::Unknown, scope, "API call that may write")
            } else {
                Verdict::new(ShellClass::ReadOnly, scope, "API read")
            })
        }
        _ => None,
    };
    Some(special.unwrap_or_else(|| table.verdict(&key, scope)))
}

fn no_subcommand<'a>(args: &[Word], scope: &str) -> Verdict<'a> {
    let lits = literals(args).unwrap_or_default();
    if lits.is_empty() && scope == "systemctl" {
        return Verdict::new(ShellClass::ReadOnly, scope, "lists units");
    }
    if !lits.is_empty()
        && lits.iter().all(|t| t.starts_with('-'))
        && lits.iter().any(|t| VERSION_FLAGS.contains(t))
    {
        return Verdict::new(ShellClass::ReadOnly, scope, "prints version or help");
    }
    Verdict::new(ShellClass::Unknown, scope, "no subcommand")
}

/// pip (also `python -m pip`, `uv pip`): `program` is used for the scope.
pub(super) fn pip<'a>(program: &str, args: &'a [Word]) -> Verdict<'a> {
    match subcommand(args, &[]) {
        Some((i, sub)) => {
            let scope = format!("{program} {sub}");
            let rest = args.get(i + 1..).unwrap_or_default();
            if sub == "config" || sub == "cache" {
                let read = matches!(
                    subcommand(rest, &[]),
                    Some((_, "list" | "get" | "info" | "dir"))
                );
                if !read {
                    return Verdict::new(ShellClass::Unknown, &scope, "changes pip settings");
                }
                return Verdict::new(ShellClass::ReadOnly, &scope, "read-only");
            }
            PIP.verdict(sub, &scope)
        }
        None => no_subcommand(args, program),
    }
}

fn js<'a>(name: &str, args: &'a [Word], scope: &str) -> Verdict<'a> {
    if has_flag(args, &['g'], &["--global"])
        || args.iter().any(|a| a.text() == Some("--location=global"))
        || (name == "yarn" && args.first().and_then(Word::text) == Some("global"))
    {
        return Verdict::new(ShellClass::Destructive, scope, "installs globally").outside();
    }
    let Some((key, rest)) = key(name, args) else {
        if name == "yarn" && literals(args).is_some_and(|l| l.is_empty()) {
            return Verdict::new(
                ShellClass::Unknown,
                scope,
                "installs packages, which run their lifecycle scripts",
            );
        }
        return no_subcommand(args, scope);
    };
    let key = key.as_str();
    let sub2 = subcommand(rest, &[]).map(|(_, s)| s);
    if key == "config" || (name == "npm" && key == "pkg") {
        return match sub2 {
            Some("get" | "list" | "ls") | None => {
                Verdict::new(ShellClass::ReadOnly, scope, "read-only")
            }
            Some(_) => Verdict::new(ShellClass::Unknown, scope, "changes configuration"),
        };
    }
    if key == "audit" && sub2 != Some("fix") {
        return Verdict::new(ShellClass::ReadOnly, scope, "read-only");
    }
    if JS_READ.contains(&key) {
        Verdict::new(ShellClass::ReadOnly, scope, "read-only")
    } else if JS_INSTALL.contains(&key) {
        Verdict::new(
            ShellClass::Unknown,
            scope,
            "installs packages, which run their lifecycle scripts",
        )
    } else if JS_BENIGN.contains(&key) {
        Verdict::new(ShellClass::Benign, scope, "works inside the project")
    } else if JS_DESTRUCTIVE.contains(&key) {
        Verdict::new(ShellClass::Destructive, scope, "publishes to the registry")
    } else if matches!(
        key,
        "exec" | "x" | "dlx" | "link" | "login" | "logout" | "adduser"
    ) {
        Verdict::new(
            ShellClass::Unknown,
            scope,
            "runs or installs outside the project",
        )
    } else if name == "bun" && key.contains('.') {
        Verdict::new(ShellClass::Unknown, scope, "runs a script")
    } else if name != "npm" {
        Verdict::new(ShellClass::Benign, scope, "runs a package.json script")
    } else {
        Verdict::new(ShellClass::Unknown, scope, "subcommand not known")
    }
}
