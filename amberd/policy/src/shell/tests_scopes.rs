//! Scope extraction tests: `scope::scope` on argument vectors, scopes as `classify`
//! reports them (wrappers transparent, `sudo` kept, deduplicated, in order, read-only parts
//! left out), and a table pinning class, scopes and the outside flag together.

use std::path::Path;

use super::ShellClass::{self, Benign, Destructive, ReadOnly, Unknown};
use super::classify;
use super::scope::scope;
use super::tests::run;
use super::words::{Word, word};

fn words(line: &str) -> Vec<Word> {
    line.split_whitespace()
        .map(|w| word(w, 0).unwrap_or_default())
        .collect()
}

fn scope_of(line: &str) -> String {
    let argv = words(line);
    let (name, args) = argv
        .split_first()
        .map_or(("", &[][..]), |(n, a)| (n.text().unwrap_or_default(), a));
    scope(name, args)
}

#[test]
fn program_and_subcommand() {
    let cases = [
        ("ls -la", "ls"),
        ("rm -rf build", "rm"),
        ("git push origin main", "git push"),
        ("git -C sub -c color.ui=never log -p", "git log"),
        ("git --no-pager diff", "git diff"),
        ("git", "git"),
        ("git --version", "git"),
        ("git $SUB", "git"),
        ("cargo publish --dry-run", "cargo publish"),
        ("cargo +nightly -Z unstable-options build", "cargo build"),
        ("cargo --locked test", "cargo test"),
        ("npm install left-pad", "npm install"),
        ("npm --prefix web run build", "npm run"),
        ("pnpm -C web test", "pnpm test"),
        ("yarn --cwd web add x", "yarn add"),
        ("go -C mod test ./...", "go test"),
        ("docker --context prod compose up -d", "docker compose up"),
        ("docker -H tcp://x ps", "docker ps"),
        ("podman image rm x", "podman image rm"),
        ("kubectl -n prod get pods", "kubectl get"),
        ("kubectl config use-context x", "kubectl config use-context"),
        ("helm -n x uninstall app", "helm uninstall"),
        ("systemctl --user restart app", "systemctl restart"),
        ("apt-get -o X=1 install nginx", "apt-get install"),
        ("pip install -r req.txt", "pip install"),
        ("uv --directory x sync", "uv sync"),
        ("gh -R o/r pr merge 1", "gh pr merge"),
        ("gh api repos/o/r", "gh api"),
        (
            "rustup toolchain install nightly",
            "rustup toolchain install",
        ),
        ("terraform state rm x", "terraform state rm"),
        ("npx -p pkg cowsay hi", "npx cowsay"),
        ("make -j2 test", "make"),
    ];
    for (line, want) in cases {
        assert_eq!(scope_of(line), want, "{line}");
    }
}

fn scopes(command: &str) -> Vec<String> {
    classify(command, Path::new("/ws"), Path::new("/ws")).scopes
}

#[test]
fn scopes_through_classify() {
    assert_eq!(scopes("git status && git status; git push"), ["git push"]);
    assert_eq!(scopes("sudo -E timeout 5 nice rm -r x"), ["sudo", "rm"]);
    assert_eq!(scopes("env A=1 xargs -0 git add"), ["git add"]);
    assert_eq!(
        scopes("bash -lc 'cargo fmt && cargo clippy'"),
        ["cargo fmt", "cargo clippy"]
    );
    assert_eq!(scopes("echo $(git rev-parse HEAD) | tee out"), ["tee"]);
    assert_eq!(scopes("python3 -m pip install x"), ["pip install"]);
    assert_eq!(scopes("/usr/bin/git push"), ["git push"]);
    assert_eq!(scopes("./gradlew test"), ["./gradlew"]);
    assert_eq!(scopes("echo 'unterminated"), Vec::<String>::new());
}

#[test]
fn read_only_parts_add_no_scope() {
    assert_eq!(scopes("rm -rf \"$(pwd)/x\""), ["rm"]);
    assert_eq!(scopes("cat a | tee b"), ["tee"]);
    assert_eq!(scopes("git status && git push"), ["git push"]);
    // A read-only command alone keeps its scope (an ask rule may ask for it).
    assert_eq!(scopes("ls | wc -l"), ["ls", "wc"]);
}

/// (command, class, scopes, outside_workspace)
const DETAILED: &[(&str, ShellClass, &[&str], bool)] = &[
    ("rm -rf build2", Destructive, &["rm"], false),
    (
        "rsync -a --delete src/ backup/",
        Destructive,
        &["rsync"],
        false,
    ),
    (
        "rsync -a --delete src/ /srv/b/",
        Destructive,
        &["rsync"],
        true,
    ),
    ("git push origin main", Destructive, &["git push"], false),
    (
        "cargo publish --dry-run",
        Destructive,
        &["cargo publish"],
        false,
    ),
    ("npm install left-pad", Unknown, &["npm install"], false),
    ("ls | grep x | ls", ReadOnly, &["ls", "grep"], false),
    ("cd /tmp && rm x", Destructive, &["rm"], true),
    ("echo hi > /etc/motd", Destructive, &["echo"], true),
    ("sudo rm -r /var/x", Destructive, &["sudo", "rm"], true),
    ("rm -rf build", Destructive, &["rm"], false),
    ("chmod -R 755 /srv", Destructive, &["chmod"], true),
    (
        "timeout 5 env A=1 nice -n 3 git push",
        Destructive,
        &["git push"],
        false,
    ),
    (
        "bash -lc 'git fetch && git status'",
        Benign,
        &["git fetch"],
        false,
    ),
    ("find . -exec rm {} +", Destructive, &["find", "rm"], false),
    ("ls | xargs -n1 rm", Destructive, &["rm"], false),
    ("git -C sub commit -m x", Benign, &["git commit"], false),
    (
        "docker compose up -d",
        Unknown,
        &["docker compose up"],
        false,
    ),
    ("gh pr list", ReadOnly, &["gh pr list"], false),
    (
        "cargo install ripgrep",
        Destructive,
        &["cargo install"],
        true,
    ),
    ("echo $(curl -s x) > out", Unknown, &["curl"], false),
    ("mkdir -p /ws/a /ws2/b", Destructive, &["mkdir"], true),
    ("cp a /ws/b", Benign, &["cp"], false),
];

#[test]
fn detailed_table() {
    for (command, class, scopes, outside) in DETAILED {
        let got = run(command);
        assert_eq!(got.class, *class, "{command}: {}", got.reason);
        assert_eq!(got.scopes, *scopes, "{command}");
        assert_eq!(got.outside_workspace, *outside, "{command}");
    }
}
