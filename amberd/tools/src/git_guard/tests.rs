//! The guard against what git reads, on real directories (and real git).

// Tests start real servers and git of their own.
#![allow(clippy::disallowed_methods)]

use super::config::{first_refused_key, minimal_config};
use super::*;

#[test]
fn only_the_keys_git_init_and_a_checkout_write_are_benign() {
    let plain = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                 \tlogallrefupdates = true\n[user]\n\tname = A\n\temail = a@b\n\
                 [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
    assert_eq!(first_refused_key(plain), None);
    let cases: &[(&str, &str)] = &[
        ("[core]\n\tfsmonitor = touch x\n", "core.fsmonitor"),
        ("[core]\n\thooksPath = /tmp\n", "core.hookspath"),
        ("[filter \"x\"]\n\tsmudge = sh\n", "filter.*.smudge"),
        ("[include]\n\tpath = ../evil\n", "include.path"),
        ("[includeIf \"gitdir:/\"]\n\tpath = x\n", "includeif.*.path"),
        ("[remote \"o\"]\n\turl = ext::sh\n", "remote.*.url"),
        ("[alias]\n\tst = !sh\n", "alias.st"),
        ("[core] fsmonitor = x\n", "an unreadable line"),
        ("[core]\n\teditor = vi \\\n x\n", "a continued line"),
        (
            "[branch.main]\n\tremote = o\n[diff \"x\"]\n\ttextconv = sh\n",
            "diff.*.textconv",
        ),
    ];
    for (text, refused) in cases {
        let found = first_refused_key(text).unwrap_or_default();
        assert!(found.starts_with(refused), "{text:?}: {found}");
    }
}

#[test]
fn the_minimal_config_keeps_the_format_and_nothing_else() {
    let refused = "[core]\n\trepositoryformatversion = 1\n\tfsmonitor = x\n\
                   [extensions]\n\tobjectformat = sha256\n";
    let minimal = minimal_config(refused);
    assert!(minimal.contains("repositoryformatversion = 1"), "{minimal}");
    assert!(minimal.contains("objectformat = sha256"), "{minimal}");
    assert_eq!(first_refused_key(&minimal), None, "{minimal}");
    assert!(!minimal.contains("fsmonitor"));
}

#[test]
fn a_planted_commondir_and_a_new_repository_s_programs_are_undone() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let guard = GitGuard::before(ws);
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
    std::fs::write(ws.join(".git/commondir"), "../evil\n").unwrap();
    let hook = ws.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nevil\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let note = guard.after().unwrap();
    assert!(
        note.contains("commondir") && note.contains("core.fsmonitor"),
        "{note}"
    );
    assert!(!ws.join(".git/commondir").exists());
    let config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    assert_eq!(first_refused_key(&config), None, "{config}");
    assert!(ws.join(".git/config.refused-by-amber").is_file());
    let mode = std::fs::metadata(&hook).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0, "{mode:o}");
    // An existing repository's config is the sandbox's to protect, not changed here.
    let again = GitGuard::before(ws);
    std::fs::write(ws.join(".git/config"), "[core]\n\teditor = vi\n").unwrap();
    assert_eq!(again.after(), None);
    // A `.git` file planted where there was no repository is set aside.
    let other = tempfile::tempdir().unwrap();
    let guard = GitGuard::before(other.path());
    std::fs::write(other.path().join(".git"), "gitdir: evil\n").unwrap();
    assert!(guard.after().is_some());
    assert!(!other.path().join(".git").exists());
}

#[test]
fn a_clone_s_config_is_benign_but_a_remote_that_runs_a_program_is_not() {
    let clone = "[core]\n\trepositoryformatversion = 0\n\tworktree = ../../../lib\n\
                 [remote \"origin\"]\n\turl = https://example.invalid/x.git\n\
                 \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                 [submodule \"lib\"]\n\turl = ../lib\n\tactive = true\n";
    assert_eq!(first_refused_key(clone), None);
    for url in ["ext::sh -c evil", "fd::0", "-oProxyCommand=evil"] {
        let text = format!("[remote \"o\"]\n\turl = {url}\n");
        assert_eq!(
            first_refused_key(&text).as_deref(),
            Some("remote.*.url"),
            "{url}"
        );
    }
}

/// Runs git in `dir` with no user or system configuration.
fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository whose `git status` would run `fsmonitor` of any config it reads, and the
/// sentinel that shows whether it did.
struct Planted {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    sentinel: PathBuf,
    evil_config: String,
}

fn planted() -> Planted {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "a.txt"]);
    git(&ws, &["commit", "-qm", "one"]);
    let sentinel = root.join("ran");
    let evil_config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = echo ran >> {}; false\n",
        sentinel.display()
    );
    Planted {
        _tmp: tmp,
        ws,
        sentinel,
        evil_config,
    }
}

impl Planted {
    /// A git dir at `dir` (relative to the workspace) whose config runs the payload.
    fn evil_git_dir(&self, dir: &str) -> PathBuf {
        let path = self.ws.join(dir);
        git(&self.ws, &["init", "-q", "--bare", dir]);
        std::fs::write(path.join("config"), &self.evil_config).unwrap();
        path
    }

    fn users_git_status_runs_nothing(&self) {
        git(&self.ws, &["status", "--porcelain"]);
        assert!(
            !self.sentinel.exists(),
            "the user's git status ran a planted program"
        );
    }
}

#[test]
fn a_gitlink_the_command_adds_cannot_send_the_user_s_git_to_its_config() {
    let p = planted();
    let guard = GitGuard::before(&p.ws);
    // All in one command: a gitlink without `.gitmodules`, its `.git` file naming a git
    // dir of the command's making.
    let evil = p.evil_git_dir("evil.git");
    let sha = "1234567890123456789012345678901234567890";
    git(
        &p.ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},sub"),
        ],
    );
    std::fs::create_dir(p.ws.join("sub")).unwrap();
    std::fs::write(
        p.ws.join("sub/.git"),
        format!("gitdir: {}\n", evil.display()),
    )
    .unwrap();
    let note = guard.after().unwrap();
    assert!(note.contains("sub/.git"), "{note}");
    assert!(!p.ws.join("sub/.git").exists());
    p.users_git_status_runs_nothing();
}

#[test]
fn a_gitlink_s_new_git_directory_is_checked_as_a_new_repository() {
    let p = planted();
    let sha = "1234567890123456789012345678901234567890";
    git(
        &p.ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},sub"),
        ],
    );
    std::fs::create_dir(p.ws.join("sub")).unwrap();
    let guard = GitGuard::before(&p.ws);
    git(&p.ws.join("sub"), &["init", "-q"]);
    std::fs::write(p.ws.join("sub/.git/config"), &p.evil_config).unwrap();
    let note = guard.after().unwrap();
    assert!(
        note.contains("sub/.git/config") && note.contains("core.fsmonitor"),
        "{note}"
    );
    p.users_git_status_runs_nothing();
}

#[test]
fn a_submodule_s_git_file_may_name_only_a_repository_under_modules_that_existed() {
    let p = planted();
    let lib = p.ws.parent().unwrap().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    git(&lib, &["init", "-q"]);
    git(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
    git(
        &p.ws,
        &[
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    git(&p.ws, &["commit", "-qm", "submodule"]);
    assert!(p.ws.join(".git/modules/vendor/lib").is_dir());

    // Rewritten to a git dir elsewhere: set aside.
    let guard = GitGuard::before(&p.ws);
    let evil = p.evil_git_dir("evil.git");
    std::fs::write(
        p.ws.join("vendor/lib/.git"),
        format!("gitdir: {}\n", evil.display()),
    )
    .unwrap();
    let note = guard.after().unwrap();
    assert!(note.contains("vendor/lib/.git"), "{note}");
    p.users_git_status_runs_nothing();
    std::fs::rename(
        p.ws.join("vendor/lib/.git.refused-by-amber"),
        p.ws.join("vendor/lib/.git"),
    )
    .unwrap();

    // Rewritten to a new repository under `modules`: that one is checked.
    let guard = GitGuard::before(&p.ws);
    p.evil_git_dir(".git/modules/planted");
    std::fs::write(
        p.ws.join("vendor/lib/.git"),
        "gitdir: ../../.git/modules/planted\n",
    )
    .unwrap();
    let note = guard.after().unwrap();
    assert!(note.contains("core.fsmonitor"), "{note}");
    p.users_git_status_runs_nothing();

    // Unchanged, nothing is done (the user's own submodule config is theirs).
    let guard = GitGuard::before(&p.ws);
    assert_eq!(guard.after(), None);
}

#[test]
fn the_spawned_spec_names_the_nested_checkouts_that_have_a_git() {
    let p = planted();
    let sha = "1234567890123456789012345678901234567890";
    for (link, populated) in [("a/sub", true), ("b", false)] {
        git(
            &p.ws,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},{link}"),
            ],
        );
        std::fs::create_dir_all(p.ws.join(link)).unwrap();
        if populated {
            git(&p.ws.join(link), &["init", "-q"]);
        }
    }
    let spec = SandboxSpec {
        egress: None,
        mode: SandboxMode::WorkspaceWrite,
        network: false,
        workspace: p.ws.clone(),
        tmp_dir: p.ws.join("tmp"),
        writable_roots: Vec::new(),
        hidden: Vec::new(),
        masked: Vec::new(),
        allow_unix_sockets: Vec::new(),
        nested_checkouts: Vec::new(),
        daemon_pid: None,
        guarded_pids: Vec::new(),
        simulate_landlock_abi: None,
        in_place: false,
    };
    let (_, spawned) = GitGuard::around(&spec).unwrap();
    assert_eq!(spawned.nested_checkouts, vec![PathBuf::from("a/sub")]);
    let read_only = SandboxSpec {
        egress: None,
        mode: SandboxMode::ReadOnly,
        ..spec
    };
    assert!(GitGuard::around(&read_only).is_none());
}
