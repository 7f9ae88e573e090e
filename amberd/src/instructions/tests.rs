//! Discovery order, headers, the cap, skipped files and the stat-only refresh.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::discover::{self, Candidate};
use super::{Instructions, environment};

fn names() -> Vec<String> {
    vec!["AGENTS.md".to_owned()]
}

fn no_global(workspace: &Path, max_bytes: usize) -> Instructions {
    Instructions::with_global(workspace, &names(), max_bytes, None)
}

/// A repository at `<tmp>/repo` with the workspace two levels down.
fn nested() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("repo");
    let workspace = root.join("crates/app");
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::create_dir_all(&workspace).unwrap();
    fs::write(root.join("AGENTS.md"), "root rules\n").unwrap();
    fs::write(root.join("crates/AGENTS.md"), "crates rules\n").unwrap();
    fs::write(workspace.join("AGENTS.md"), "app rules\n").unwrap();
    (tmp, workspace)
}

#[test]
fn files_come_from_the_git_root_down_to_the_workspace_nearest_last_with_relative_headers() {
    let (_tmp, workspace) = nested();
    let mut instructions = no_global(&workspace, 32_768);
    assert!(instructions.refresh());
    let text = instructions.text();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    assert!(at("## ../../AGENTS.md\n\nroot rules") < at("## ../AGENTS.md\n\ncrates rules"));
    assert!(at("## ../AGENTS.md") < at("## AGENTS.md\n\napp rules"));
    assert!(text.starts_with("# Project instructions"), "{text}");
}

#[test]
fn outside_a_repository_only_the_workspace_itself_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().canonicalize().unwrap();
    let workspace = parent.join("ws");
    fs::create_dir_all(&workspace).unwrap();
    fs::write(parent.join("AGENTS.md"), "parent rules").unwrap();
    fs::write(workspace.join("AGENTS.md"), "own rules").unwrap();
    let mut instructions = no_global(&workspace, 32_768);
    instructions.refresh();
    assert!(instructions.text().contains("own rules"));
    assert!(!instructions.text().contains("parent rules"));
}

#[test]
fn no_files_render_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut instructions = no_global(&tmp.path().canonicalize().unwrap(), 32_768);
    assert!(!instructions.refresh());
    assert_eq!(instructions.text(), "");
}

#[test]
fn the_cap_keeps_the_nearest_files_first_and_marks_the_cut() {
    let (_tmp, workspace) = nested();
    fs::write(workspace.join("AGENTS.md"), "a".repeat(30)).unwrap();
    fs::write(workspace.join("../AGENTS.md"), "b".repeat(30)).unwrap();
    // 30 bytes for the nearest file, 10 of the next, none of the root's.
    let mut instructions = no_global(&workspace, 40);
    instructions.refresh();
    let text = instructions.text();
    assert!(
        text.contains(&format!("## AGENTS.md\n\n{}", "a".repeat(30))),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "## ../AGENTS.md\n\n{}\n\n[amber: cut here: the remaining 20 bytes",
            "b".repeat(10)
        )),
        "{text}"
    );
    assert!(!text.contains("root rules"), "{text}");
    assert!(
        text.contains(
            "[amber: `../../AGENTS.md` was left out: instructions are capped at 40 bytes"
        ),
        "{text}"
    );
}

#[test]
fn the_cut_falls_on_a_character_boundary() {
    let tmp = tempfile::tempdir().unwrap();
    let workspace = tmp.path().canonicalize().unwrap();
    fs::write(workspace.join("AGENTS.md"), "ééééé").unwrap();
    let mut instructions = no_global(&workspace, 5);
    instructions.refresh();
    let text = instructions.text();
    assert!(
        text.contains("## AGENTS.md\n\néé\n\n[amber: cut here: the remaining 6 bytes"),
        "{text}"
    );
}

#[test]
fn the_global_file_comes_first_and_is_named_by_its_home_path() {
    let (tmp, workspace) = nested();
    let home = tmp.path().canonicalize().unwrap().join("home");
    let config_dir = home.join(".config/amber");
    let global = discover::global_file(Some(&config_dir), Some(&home)).unwrap();
    fs::create_dir_all(global.path.parent().unwrap()).unwrap();
    fs::write(&global.path, "global rules").unwrap();
    assert_eq!(global.shown, "~/.config/amber/AGENTS.md");
    let mut instructions = Instructions::with_global(&workspace, &names(), 32_768, Some(global));
    instructions.refresh();
    let text = instructions.text();
    let global_at = text
        .find("## ~/.config/amber/AGENTS.md\n\nglobal rules")
        .unwrap();
    assert!(global_at < text.find("root rules").unwrap(), "{text}");
}

#[test]
fn a_global_file_outside_home_is_shown_by_its_absolute_path() {
    let global =
        discover::global_file(Some(Path::new("/x/cfg/amber")), Some(Path::new("/h"))).unwrap();
    assert_eq!(global.path, Path::new("/x/cfg/amber/AGENTS.md"));
    assert_eq!(global.shown, "/x/cfg/amber/AGENTS.md");
    assert!(discover::global_file(None, Some(Path::new("/h"))).is_none());
}

#[test]
fn unreadable_and_invalid_files_are_skipped_with_a_note() {
    let (_tmp, workspace) = nested();
    fs::write(workspace.join("AGENTS.md"), [0xff, 0xfe, b'x']).unwrap();
    let crates = workspace.join("../AGENTS.md");
    fs::set_permissions(&crates, fs::Permissions::from_mode(0o000)).unwrap();
    let readable_anyway = fs::read(&crates).is_ok(); // running as root
    let mut instructions = no_global(&workspace, 32_768);
    instructions.refresh();
    let text = instructions.text();
    assert!(
        text.contains("[amber: `AGENTS.md` was skipped: not valid UTF-8]"),
        "{text}"
    );
    if !readable_anyway {
        assert!(
            text.contains("[amber: `../AGENTS.md` was skipped: cannot be read"),
            "{text}"
        );
    }
    assert!(text.contains("root rules"), "{text}");
}

#[test]
fn a_symlink_resolving_outside_the_workspace_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let workspace = base.join("ws");
    fs::create_dir_all(&workspace).unwrap();
    fs::write(base.join("secret.md"), "SECRET").unwrap();
    symlink(base.join("secret.md"), workspace.join("AGENTS.md")).unwrap();
    let mut instructions = no_global(&workspace, 32_768);
    instructions.refresh();
    let text = instructions.text();
    assert!(!text.contains("SECRET"), "{text}");
    assert!(
        text.contains("`AGENTS.md` was skipped: not followed: a symlink to"),
        "{text}"
    );

    // Inside the workspace it is followed.
    fs::remove_file(workspace.join("AGENTS.md")).unwrap();
    fs::write(workspace.join("real.md"), "REAL").unwrap();
    symlink(workspace.join("real.md"), workspace.join("AGENTS.md")).unwrap();
    instructions.refresh();
    assert!(
        instructions.text().contains("REAL"),
        "{}",
        instructions.text()
    );
}

#[test]
fn refresh_rereads_only_when_a_stamp_or_the_set_of_files_changed() {
    let (_tmp, workspace) = nested();
    let mut instructions = no_global(&workspace, 32_768);
    assert!(instructions.refresh());
    assert!(!instructions.refresh(), "nothing changed");
    fs::write(workspace.join("AGENTS.md"), "app rules, edited\n").unwrap();
    assert!(instructions.refresh());
    assert!(instructions.text().contains("app rules, edited"));
    fs::remove_file(workspace.join("../AGENTS.md")).unwrap();
    assert!(instructions.refresh());
    assert!(!instructions.text().contains("crates rules"));
    fs::write(workspace.join("../AGENTS.md"), "back").unwrap();
    assert!(instructions.refresh());
    assert!(instructions.text().contains("## ../AGENTS.md\n\nback"));
}

#[test]
fn several_file_names_are_read_in_their_order_per_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let workspace = tmp.path().canonicalize().unwrap();
    fs::create_dir_all(workspace.join(".amber")).unwrap();
    fs::write(workspace.join("CLAUDE.md"), "claude").unwrap();
    fs::write(workspace.join(".amber/instructions.md"), "amber").unwrap();
    let names = vec!["CLAUDE.md".to_owned(), ".amber/instructions.md".to_owned()];
    let mut instructions = Instructions::with_global(&workspace, &names, 32_768, None);
    instructions.refresh();
    let text = instructions.text();
    assert!(
        text.find("## CLAUDE.md").unwrap() < text.find("## .amber/instructions.md").unwrap(),
        "{text}"
    );
}

#[test]
fn file_names_must_stay_in_their_directory() {
    for bad in ["", "../AGENTS.md", "/etc/AGENTS.md", "a/../../b", "."] {
        assert!(discover::check_name(bad).is_err(), "{bad}");
    }
    for good in ["AGENTS.md", ".amber/instructions.md", "./CLAUDE.md"] {
        assert!(discover::check_name(good).is_ok(), "{good}");
    }
}

#[test]
fn relative_paths_climb_with_dotdot() {
    let rel = discover::relative_to;
    assert_eq!(
        rel(Path::new("/r/a/b"), Path::new("/r/AGENTS.md")),
        "../../AGENTS.md"
    );
    assert_eq!(
        rel(Path::new("/r"), Path::new("/r/x/AGENTS.md")),
        "x/AGENTS.md"
    );
}

#[test]
fn candidates_stop_at_the_discovery_root() {
    let (_tmp, workspace) = nested();
    let found: Vec<Candidate> = discover::candidates(&workspace, &names(), None);
    let shown: Vec<&str> = found.iter().map(|c| c.shown.as_str()).collect();
    assert_eq!(shown, ["../../AGENTS.md", "../AGENTS.md", "AGENTS.md"]);
}

#[test]
fn the_environment_block_names_the_repository_facts_or_says_there_is_none() {
    let ws = Path::new("/work/ws");
    let none = environment::render("2025-01-02", "/bin/zsh", &here(), ws, None);
    assert!(none.contains("- Date: 2025-01-02 (UTC)"), "{none}");
    assert!(none.contains("- Shell: /bin/zsh"), "{none}");
    assert!(none.contains("- Workspace root: /work/ws"), "{none}");
    assert!(none.contains("- Git: not a git repository"), "{none}");
    let facts = environment::GitFacts {
        branch: Some("main".into()),
        changed_files: Some(3),
        last_commit: Some("Fix the parser".into()),
    };
    let repo = environment::render("2025-01-02", "/bin/sh", &here(), ws, Some(&facts));
    assert!(repo.contains("- Git branch: main"), "{repo}");
    assert!(repo.contains("- Changed files (git status): 3"), "{repo}");
    assert!(repo.contains("- Last commit: Fix the parser"), "{repo}");
    assert_eq!(environment::today(std::time::UNIX_EPOCH), "1970-01-01");
}

/// A directory holding only an executable `git` script with `body`.
fn fake_git(body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let git = dir.path().join("git");
    fs::write(&git, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&git, fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// amberd's git, unsandboxed (the test runner has no sandbox helper), finding `git` only in
/// `dir`.
fn git_in(dir: &Path) -> crate::workspace_git::WorkspaceGit {
    crate::workspace_git::WorkspaceGit::direct_for_tests(&[(
        "PATH".into(),
        dir.as_os_str().to_owned(),
    )])
}

#[tokio::test]
async fn a_missing_git_leaves_the_repository_facts_unknown_not_an_error() {
    let (_tmp, workspace) = nested();
    let empty = tempfile::tempdir().unwrap();
    let block = environment::environment_block(&workspace, &git_in(empty.path())).await;
    assert!(
        block.contains("- Git branch: (detached HEAD or unknown)"),
        "{block}"
    );
    assert!(
        block.contains("- Changed files (git status): unknown"),
        "{block}"
    );
    assert!(block.contains("- Last commit: (none)"), "{block}");
}

#[tokio::test]
async fn a_git_that_hangs_is_killed_after_the_timeout() {
    let (_tmp, workspace) = nested();
    let bin = fake_git("exec /bin/sleep 30");
    let started = std::time::Instant::now();
    let block = environment::environment_block(&workspace, &git_in(bin.path())).await;
    // The three calls run side by side, each cut at GIT_TIMEOUT: far less than the sleep.
    let took = started.elapsed();
    assert!(
        took >= environment::GIT_TIMEOUT,
        "took {took:?}: git did not hang"
    );
    assert!(
        took < std::time::Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        block.contains("- Changed files (git status): unknown"),
        "{block}"
    );
}

#[tokio::test]
async fn the_facts_come_from_git_s_output() {
    let (_tmp, workspace) = nested();
    // The subcommand follows amberd's `-C DIR` and `-c KEY=VALUE` pins.
    let bin = fake_git(
        "while [ \"$1\" = -C ] || [ \"$1\" = -c ]; do shift 2; done\ncase \"$1\" in\n  branch) echo feature/x ;;\n  status) printf ' M a\\n?? b\\n' ;;\n  log) echo 'Fix the parser' ;;\nesac",
    );
    let block = environment::environment_block(&workspace, &git_in(bin.path())).await;
    assert!(block.contains("- Git branch: feature/x"), "{block}");
    assert!(block.contains("- Changed files (git status): 2"), "{block}");
    assert!(block.contains("- Last commit: Fix the parser"), "{block}");
}

fn here() -> environment::Machine<'static> {
    environment::Machine {
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
        host: None,
    }
}
