//! Where commands write: a table pinning class and the outside and protected flags —
//! writes to protected paths, directory options and links that write outside the
//! workspace, program-running git config, wrappers around writers — and how the commands
//! are rendered for rule matching, with their lexical write targets.
//! (command, class, outside, protected)

use super::ShellClass::{self, Benign, Destructive, ReadOnly, Unknown};
use super::tests::run;

const WRITE_TARGETS: &[(&str, ShellClass, bool, bool)] = &[
    // compound commands: every part is judged
    ("rm -f a.txt; git clean -fdx", Destructive, false, false),
    ("rm -rf build2", Destructive, false, false),
    // wrappers and nesting around `touch`
    ("env touch t1", Benign, false, false),
    ("bash -c \"touch t2\"", Benign, false, false),
    ("(touch t3)", Benign, false, false),
    ("FOO=1 touch t4", Benign, false, false),
    ("echo $(touch t5)", Benign, false, false),
    ("timeout 5 touch t6", Benign, false, false),
    ("/usr/bin/touch t7", Benign, false, false),
    ("if true; then touch t9; fi", Benign, false, false),
    ("git -C . push", Destructive, false, false),
    ("touch t10", Benign, false, false),
    // protected paths
    (
        "echo '[[rules]]' > .amber/rules.toml",
        Destructive,
        false,
        true,
    ),
    ("printf x >> .amber/rules.toml", Destructive, false, true),
    ("tee .amber/rules.toml < new", Destructive, false, true),
    ("cp rules.toml .amber/rules.toml", Destructive, false, true),
    ("mv x .amber/skills/evil", Destructive, false, true),
    ("ln -sf /tmp/r .amber/rules.toml", Destructive, false, true),
    ("mkdir -p .amber/skills/x", Destructive, false, true),
    (
        "echo 'rm -rf ~' > .git/hooks/pre-commit",
        Destructive,
        false,
        true,
    ),
    ("chmod +x .git/hooks/pre-commit", Destructive, false, true),
    ("cp hook.sh .git/hooks/pre-push", Destructive, false, true),
    (
        "cd .git/hooks && cat > post-checkout < x",
        Destructive,
        false,
        true,
    ),
    ("echo '[core]' >> .git/config", Destructive, false, true),
    ("sed -i s/a/b/ .git/config", Destructive, false, true),
    ("cat .amber/rules.toml", ReadOnly, false, false),
    ("ls .git/hooks", ReadOnly, false, false),
    ("echo x > .github/workflows/ci.yml", Benign, false, false),
    // git config keys that run programs
    ("git config core.hooksPath /x", Unknown, false, false),
    (
        "git config core.pager 'less; rm -rf ~'",
        Unknown,
        false,
        false,
    ),
    ("git config core.editor vim", Unknown, false, false),
    ("git config core.fsmonitor ./fs.sh", Unknown, false, false),
    (
        "git config core.sshCommand 'ssh -i k'",
        Unknown,
        false,
        false,
    ),
    ("git config diff.external ./d.sh", Unknown, false, false),
    ("git config alias.co '!sh x'", Unknown, false, false),
    ("git config difftool.x.cmd ./t", Unknown, false, false),
    ("git config filter.lfs.clean ./c", Unknown, false, false),
    ("git config credential.helper store", Unknown, false, false),
    ("git config include.path ../x", Unknown, false, false),
    (
        "git config --add includeIf.gitdir:x.path y",
        Unknown,
        false,
        false,
    ),
    ("git config set core.hooksPath /x", Unknown, false, false),
    ("git config --local --edit", Unknown, false, false),
    ("git config user.name Ada", Benign, false, false),
    ("git config --get core.hooksPath", ReadOnly, false, false),
    ("git config core.hooksPath", ReadOnly, false, false),
    ("git config -l", ReadOnly, false, false),
    ("git config --list --show-origin", ReadOnly, false, false),
    (
        "git config --file /tmp/x user.name a",
        Destructive,
        true,
        false,
    ),
    (
        "git config --global core.hooksPath /x",
        Destructive,
        true,
        false,
    ),
    (
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/x git commit",
        Unknown,
        false,
        false,
    ),
    (
        "env GIT_CONFIG_GLOBAL=/tmp/g git status",
        Unknown,
        false,
        false,
    ),
    (
        "git -c core.hooksPath=/x commit -m m",
        Unknown,
        false,
        false,
    ),
    // writes outside through directory options
    ("git init /outside/g2", Destructive, true, false),
    ("git init sub", Benign, false, false),
    (
        "git init --separate-git-dir /outside/g x",
        Destructive,
        true,
        false,
    ),
    (
        "git clone https://x/r.git /outside/r",
        Destructive,
        true,
        false,
    ),
    ("git clone https://x/r.git r", Benign, false, false),
    (
        "cargo build --target-dir /outside",
        Destructive,
        true,
        false,
    ),
    (
        "cargo build --target-dir=/outside",
        Destructive,
        true,
        false,
    ),
    ("cargo build --target-dir target2", Benign, false, false),
    (
        "cargo test --manifest-path /outside/Cargo.toml",
        Destructive,
        true,
        false,
    ),
    ("cargo -C /outside build", Destructive, true, false),
    (
        "cargo tree --manifest-path /outside/Cargo.toml",
        ReadOnly,
        false,
        false,
    ),
    ("make -C /outside", Destructive, true, false),
    ("make --directory=/outside all", Destructive, true, false),
    ("make -C sub", Benign, false, false),
    ("ninja -C /outside", Destructive, true, false),
    ("cmake -B /outside/build", Destructive, true, false),
    ("npm --prefix /outside install", Destructive, true, false),
    ("npm --prefix web install", Unknown, false, false),
    ("pnpm -C /outside install", Destructive, true, false),
    ("yarn --cwd /outside add x", Destructive, true, false),
    // links
    ("ln -s /outside lnk2", Unknown, false, false),
    (
        "ln -s /outside lnk2 && echo x > lnk2/f",
        Unknown,
        false,
        false,
    ),
    ("ln -s /etc", Unknown, false, false),
    ("ln /outside/file hard", Unknown, false, false),
    ("ln -s src/lib.rs lib", Benign, false, false),
    ("ln -s -t links /outside/a", Unknown, false, false),
];

#[test]
fn write_targets_table() {
    let failures: Vec<String> = WRITE_TARGETS
        .iter()
        .filter_map(|(command, class, outside, protected)| {
            let got = run(command);
            let ok = got.class == *class
                && got.outside_workspace == *outside
                && got.protected == *protected;
            (!ok).then(|| {
                format!(
                    "{command:?}: want {class:?} outside={outside} protected={protected}, got {:?} \
                     outside={} protected={} ({})",
                    got.class, got.outside_workspace, got.protected, got.reason
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn commands_are_rendered_unwrapped_and_completeness_is_tracked() {
    let normalized = |c: &str| {
        run(c)
            .commands
            .into_iter()
            .map(|l| l.normalized)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        normalized("env A=1 touch t1"),
        ["env A=1 touch t1", "touch t1"]
    );
    assert_eq!(
        normalized("bash -c \"touch t2\""),
        ["bash -c touch t2", "touch t2"]
    );
    assert_eq!(
        normalized("echo $(touch t5)"),
        ["touch t5", "echo $(touch t5)"]
    );
    assert_eq!(normalized("FOO=1 /usr/bin/touch t4"), ["touch t4"]);
    assert_eq!(normalized("git -C . -c x=y push"), ["git push"]);
    assert_eq!(
        normalized("if true; then touch t9; fi"),
        ["true", "touch t9"]
    );
    assert!(run("rm -rf build && ls").complete);
    assert!(!run("rm x; if").complete);
    assert!(!run("$CMD x").complete);
    assert!(!run("echo $(( $(rm x) ))").complete);
    // writes are reported with their lexical absolute paths
    assert_eq!(
        run("echo x > a/b; cd c && touch d").writes,
        [std::path::PathBuf::from("/ws/a/b"), "/ws/c/d".into()]
    );
}
