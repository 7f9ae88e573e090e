//! Pushes from the pristine copy, with real git: the result lands on the branch on top of
//! the right parent, and nothing planted in the workspace's `.git` runs or redirects it.

// The test's own git sets the scene, as a person's would: not a child amber starts.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

use super::*;

/// An origin repository with `main` (`README.md`), a clone of it as a session's
/// workspace, and its pristine copy; `sentinel` is what a planted program would write.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    origin: PathBuf,
    publisher: Publisher,
    sentinel: PathBuf,
}

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    std::fs::write(seed.join("README.md"), "# app\n").unwrap();
    git_in(&seed, &["init", "-q", "-b", "main"]);
    git_in(&seed, &["add", "-A"]);
    git_in(&seed, &["commit", "-qm", "seed"]);
    let origin = root.join("origin.git");
    git_in(
        &root,
        &["clone", "-q", "--bare", "seed", origin.to_str().unwrap()],
    );
    let repo = format!("file://{}", origin.display());
    let workspace = root.join("work");
    crate::provision::clone_into(&repo, "main", &workspace)
        .await
        .unwrap();
    let pristine = root.join("state/pristine/s.git");
    keep_pristine(&workspace, &pristine).await.unwrap();
    Fixture {
        sentinel: root.join("sentinel"),
        publisher: Publisher {
            repo,
            workspace,
            pristine,
        },
        origin,
        root,
        _dir: dir,
    }
}

impl Fixture {
    fn workspace(&self) -> &Path {
        &self.publisher.workspace
    }

    /// A script that writes the sentinel, outside the workspace.
    fn planted_program(&self) -> PathBuf {
        let script = self.root.join("evil.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\ntouch {}\n", self.sentinel.display()),
        )
        .unwrap();
        let mut permissions = std::fs::metadata(&script).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&script, permissions).unwrap();
        script
    }

    fn origin_has(&self, rev: &str) -> String {
        git_in(&self.origin, &["rev-parse", "--verify", "--quiet", rev])
    }
}

#[tokio::test]
async fn a_push_commits_the_workspace_on_the_clone_then_on_its_own_last_push() {
    let f = fixture().await;
    let main = f.origin_has("refs/heads/main");
    std::fs::write(f.workspace().join("out.txt"), "1\n").unwrap();
    let first = f.publisher.push("amber/s", "one", None).await.unwrap();
    assert!(first.changed);
    let first = first.commit.unwrap();
    assert_eq!(f.origin_has("refs/heads/amber/s"), first);
    assert_eq!(
        git_in(&f.origin, &["rev-parse", &format!("{first}^")]),
        main
    );
    assert_eq!(
        git_in(&f.origin, &["show", &format!("{first}:out.txt")]),
        "1"
    );

    // Nothing new: nothing pushed, the tip said.
    let again = f
        .publisher
        .push("amber/s", "again", Some(&first))
        .await
        .unwrap();
    assert_eq!(
        again,
        Pushed {
            commit: Some(first.clone()),
            changed: false
        }
    );

    // A deletion and a change go on top of the last push.
    std::fs::remove_file(f.workspace().join("README.md")).unwrap();
    std::fs::write(f.workspace().join("out.txt"), "2\n").unwrap();
    let second = f
        .publisher
        .push("amber/s", "two", Some(&first))
        .await
        .unwrap()
        .commit
        .unwrap();
    assert_eq!(
        git_in(&f.origin, &["rev-parse", &format!("{second}^")]),
        first
    );
    assert_eq!(
        git_in(&f.origin, &["ls-tree", "--name-only", &second]),
        "out.txt"
    );

    // Unchanged and never pushed: no branch is made.
    let fresh = fixture().await;
    let none = fresh.publisher.push("amber/none", "x", None).await.unwrap();
    assert_eq!(
        none,
        Pushed {
            commit: None,
            changed: false
        }
    );
}

#[tokio::test]
async fn a_branch_that_moved_elsewhere_is_never_overwritten() {
    let f = fixture().await;
    std::fs::write(f.workspace().join("out.txt"), "1\n").unwrap();
    let first = f
        .publisher
        .push("amber/s", "one", None)
        .await
        .unwrap()
        .commit
        .unwrap();
    // Someone else's commit on the branch.
    let other = f.root.join("other");
    git_in(
        &f.root,
        &[
            "clone",
            "-q",
            "-b",
            "amber/s",
            f.origin.to_str().unwrap(),
            "other",
        ],
    );
    std::fs::write(other.join("theirs.txt"), "theirs\n").unwrap();
    git_in(&other, &["add", "-A"]);
    git_in(&other, &["commit", "-qm", "theirs"]);
    git_in(&other, &["push", "-q", "origin", "amber/s"]);
    let theirs = f.origin_has("refs/heads/amber/s");

    std::fs::write(f.workspace().join("out.txt"), "2\n").unwrap();
    let refused = f.publisher.push("amber/s", "two", Some(&first)).await;
    assert!(
        matches!(refused, Err(PublishError::Moved { .. })),
        "{refused:?}"
    );
    assert_eq!(f.origin_has("refs/heads/amber/s"), theirs);
    // `main` was never this session's: the same.
    let refused = f.publisher.push("main", "two", Some(&first)).await;
    assert!(refused.is_ok(), "main is still at the clone's commit");
}

#[tokio::test]
async fn bad_branch_names_and_commit_ids_are_refused_before_git_runs() {
    let f = fixture().await;
    for branch in ["", "-f", "refs/heads/x", "a..b", "x:y", &"a".repeat(40)] {
        let refused = f.publisher.push(branch, "m", None).await;
        assert!(
            matches!(refused, Err(PublishError::Invalid(_))),
            "{branch}: {refused:?}"
        );
    }
    let refused = f.publisher.push("ok", "m", Some("HEAD")).await;
    assert!(matches!(refused, Err(PublishError::Invalid(_))));
}

/// One way a session could plant a program (or another destination) in its workspace's
/// git directory, as the test writes it there directly (no sandbox in the way).
type Plant = fn(&Fixture, &Path);

fn set(f: &Fixture, key: &str, value: &str) {
    git_in(f.workspace(), &["config", key, value]);
}

fn plant_config(f: &Fixture, evil: &Path) {
    let evil = evil.to_str().unwrap();
    let bang = format!("!{evil}");
    for (key, value) in [
        ("core.fsmonitor", evil),
        (
            "core.hooksPath",
            f.workspace().join(".git/hooks").to_str().unwrap(),
        ),
        ("credential.helper", bang.as_str()),
        ("core.sshCommand", evil),
        ("core.pager", evil),
        ("core.askPass", evil),
        ("gpg.program", evil),
        ("commit.gpgSign", "true"),
        ("filter.evil.clean", evil),
        ("filter.evil.process", evil),
        ("filter.evil.required", "true"),
        ("remote.origin.url", "/nonexistent/evil.git"),
        ("remote.origin.pushurl", "/nonexistent/evil.git"),
        ("url./nonexistent/evil.git.insteadOf", "file://"),
        ("url./nonexistent/evil.git.pushInsteadOf", "file://"),
        ("uploadpack.packObjectsHook", evil),
        ("core.alternateRefsCommand", evil),
    ] {
        set(f, key, value);
    }
    std::fs::write(f.workspace().join(".gitattributes"), "* filter=evil\n").unwrap();
}

fn plant_hooks(f: &Fixture, evil: &Path) {
    let hooks = f.workspace().join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "pre-push",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc",
    ] {
        std::fs::copy(evil, hooks.join(hook)).unwrap();
    }
}

fn plant_include(f: &Fixture, evil: &Path) {
    let included = f.workspace().join("included.cfg");
    std::fs::write(
        &included,
        format!("[core]\n\tfsmonitor = {}\n", evil.display()),
    )
    .unwrap();
    set(f, "include.path", included.to_str().unwrap());
}

fn plant_commondir(f: &Fixture, evil: &Path) {
    // A git directory elsewhere with a hostile config, named by `commondir`.
    let elsewhere = f.workspace().join("elsewhere");
    git_in(f.workspace(), &["init", "-q", "--bare", "elsewhere"]);
    git_in(
        &elsewhere,
        &["config", "core.fsmonitor", evil.to_str().unwrap()],
    );
    std::fs::write(f.workspace().join(".git/commondir"), "../elsewhere\n").unwrap();
}

fn plant_gitfile(f: &Fixture, evil: &Path) {
    // `.git` swapped for a file sending git to a hostile repository.
    let elsewhere = f.workspace().join("elsewhere.git");
    git_in(f.workspace(), &["init", "-q", "--bare", "elsewhere.git"]);
    git_in(
        &elsewhere,
        &["config", "core.fsmonitor", evil.to_str().unwrap()],
    );
    std::fs::rename(f.workspace().join(".git"), f.workspace().join("moved-git")).unwrap();
    std::fs::write(
        f.workspace().join(".git"),
        format!("gitdir: {}\n", elsewhere.display()),
    )
    .unwrap();
}

fn plant_nested(f: &Fixture, evil: &Path) {
    // A nested repository with a commit, and one without: both with hostile configs.
    for (name, commit) in [("nested", true), ("empty-nested", false)] {
        let nested = f.workspace().join(name);
        std::fs::create_dir_all(&nested).unwrap();
        git_in(&nested, &["init", "-q"]);
        std::fs::write(nested.join("n.txt"), "n\n").unwrap();
        if commit {
            git_in(&nested, &["add", "-A"]);
            git_in(&nested, &["commit", "-qm", "n"]);
        }
        git_in(
            &nested,
            &["config", "core.fsmonitor", evil.to_str().unwrap()],
        );
        std::fs::copy(evil, nested.join(".git/hooks/pre-commit")).unwrap();
    }
}

fn plant_special_files(f: &Fixture, _evil: &Path) {
    // A FIFO would block a reader forever; a link to a file outside is a link, not its
    // content.
    let fifo = std::ffi::CString::new(f.workspace().join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    std::fs::write(f.root.join("secret.txt"), "secret-outside\n").unwrap();
    std::os::unix::fs::symlink(f.root.join("secret.txt"), f.workspace().join("link")).unwrap();
}

#[tokio::test]
async fn nothing_planted_in_the_workspace_runs_or_redirects_the_push() {
    let plants: &[(&str, Plant)] = &[
        ("config", plant_config),
        ("hooks", plant_hooks),
        ("include", plant_include),
        ("commondir", plant_commondir),
        ("gitfile", plant_gitfile),
        ("nested repositories", plant_nested),
        ("special files", plant_special_files),
    ];
    for (name, plant) in plants {
        let f = fixture().await;
        let evil = f.planted_program();
        plant(&f, &evil);
        std::fs::write(f.workspace().join("payload.txt"), "payload\n").unwrap();
        let pushed = f.publisher.push("amber/s", name, None).await;
        let pushed = match pushed {
            Ok(pushed) => pushed,
            Err(err) => panic!("{name}: the push failed: {err}"),
        };
        assert!(!f.sentinel.exists(), "{name}: a planted program ran");
        let commit = pushed.commit.unwrap();
        assert_eq!(f.origin_has("refs/heads/amber/s"), commit, "{name}");
        assert_eq!(
            git_in(&f.origin, &["show", &format!("{commit}:payload.txt")]),
            "payload",
            "{name}"
        );
        let files = git_in(&f.origin, &["ls-tree", "-r", "--name-only", &commit]);
        assert!(
            !files.lines().any(|p| p.starts_with(".git/") || p == ".git"),
            "{name}: {files}"
        );
        if *name == "special files" {
            assert!(!files.lines().any(|p| p == "pipe"), "{files}");
            let link = git_in(&f.origin, &["cat-file", "-p", &format!("{commit}:link")]);
            assert_eq!(link, f.root.join("secret.txt").display().to_string());
        }
    }
}
