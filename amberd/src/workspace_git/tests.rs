//! Tests of amberd's own git: the filter drivers read from a repository's config, the pins
//! and the environment every such git runs with.

// Tests set up repositories with git of their own.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

use super::pins::{filter_drivers, filter_pins};
use super::*;

#[test]
fn filter_driver_names_are_read_from_the_config_listing() {
    let cases: &[(&str, &[&str])] = &[
        ("", &[]),
        ("filter.lfs.smudge\ngit-lfs smudge %f\0", &["lfs"]),
        (
            "filter.lfs.smudge\nx\0filter.lfs.clean\ny\0filter.lfs.required\ntrue\0",
            &["lfs"],
        ),
        // A name may hold dots; the field is the last part.
        (
            "filter.a.b.smudge\nx\0filter.evil.process\ny\0",
            &["a.b", "evil"],
        ),
        // A key without a field, or with an empty name, names no driver.
        ("filter.smudge\nx\0filter..clean\ny\0", &[]),
    ];
    for (listed, expected) in cases {
        assert_eq!(filter_drivers(listed), *expected, "{listed:?}");
    }
    assert_eq!(
        filter_pins(&["x".to_owned()]),
        [
            "-c",
            "filter.x.clean=",
            "-c",
            "filter.x.smudge=",
            "-c",
            "filter.x.process=",
            "-c",
            "filter.x.required=false"
        ]
    );
}

#[test]
fn amberd_s_own_git_environment_has_no_git_variable() {
    let env: Vec<(OsString, OsString)> = [
        ("PATH", "/usr/bin"),
        ("GIT_DIR", "/elsewhere"),
        ("GIT_CONFIG_GLOBAL", "/evil"),
        ("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='x'"),
        ("HOME", "/home/u"),
    ]
    .iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    .collect();
    let kept: Vec<String> = git_env(&env)
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    assert_eq!(kept, ["PATH", "HOME"]);
}

/// A repository whose config defines an fsmonitor hook and a filter driver, both writing a
/// sentinel: the pinned calls run neither (here unsandboxed: the pins are the second wall
/// and must hold on their own).
#[test]
fn the_pins_keep_git_from_running_the_repository_s_programs() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let sentinel = tmp.path().join("ran");
    std::fs::create_dir_all(&repo).unwrap();
    let git = WorkspaceGit::direct_for_tests(&[(
        "PATH".into(),
        std::env::var_os("PATH").unwrap_or_default(),
    )]);
    let plain = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    plain(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    std::fs::write(repo.join(".gitattributes"), "*.txt filter=evil\n").unwrap();
    plain(&["add", "."]);
    plain(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "one",
    ]);
    let hook = format!("touch {}", sentinel.display());
    for (key, value) in [
        ("core.fsmonitor", hook.as_str()),
        ("filter.evil.clean", hook.as_str()),
        ("filter.evil.smudge", hook.as_str()),
        ("filter.evil.required", "true"),
        ("log.showSignature", "true"),
        ("gpg.program", hook.as_str()),
    ] {
        plain(&["config", key, value]);
    }
    // Racy-clean: a changed mtime makes status look at the content (through the filter).
    std::fs::write(repo.join("a.txt"), "b\n").unwrap();
    for args in [
        &["status", "--porcelain", "--ignore-submodules=dirty"][..],
        &["log", "-1", "--format=%s"],
        &["branch", "--show-current"],
        &["checkout", "--", "a.txt"],
    ] {
        let out = git
            .unfiltered(&repo)
            .unwrap()
            .run(&repo, Access::Read, args)
            .unwrap();
        assert!(out.ok, "git {args:?}: {}", out.stderr);
        assert!(!sentinel.exists(), "git {args:?} ran a repository program");
    }
    assert!(Path::new(&repo.join("a.txt")).is_file());
}
