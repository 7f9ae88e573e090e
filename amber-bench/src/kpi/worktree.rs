//! What a git worktree per session costs: `session/new` in a scratch repository
//! (`git init`, [`REPO_FILES`] small files in one commit) with and without `worktree: true`,
//! alternately on the run's daemon, each session deleted right after — the worktree one with
//! `removeWorktree: true`. Round trips at the client: `session/new` → its answer, and
//! `session/delete` → its answer. Added cost = worktree − plain, at the median and at p99.
//! Every worktree must exist after `session/new` and be gone after the delete, or the KPI
//! fails (the `amber/<short id>` branches stay, as amberd always keeps them).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use amber_client::Client;
use amber_proto::methods::SessionDelete;
use amber_proto::{SessionDeleteParams, SessionNewParams, WorktreeRequest};

use crate::error::BenchError;
use crate::report::Report;
use crate::stats::{Summary, ms};
use crate::suite::Suite;

/// Files committed in the scratch repository.
pub(crate) const REPO_FILES: usize = 300;
/// Directories they are spread over.
const REPO_DIRS: usize = 10;
/// Sessions of each kind (after the warm-up).
const RUNS: usize = 30;
/// Unmeasured pairs first.
const WARMUP: usize = 2;

/// Round trips (ms) of one kind of session.
#[derive(Debug, Default)]
struct Samples {
    new: Vec<f64>,
    delete: Vec<f64>,
}

/// The scratch repository: where it is, its files and their bytes.
struct Repo {
    path: String,
    files: usize,
    bytes: u64,
}

/// Runs `git` in `dir` with no user or system config; fails on a non-zero exit.
fn git(dir: &Path, args: &[&str]) -> Result<(), BenchError> {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=amber-bench",
            "-c",
            "user.email=amber-bench@localhost",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::Skipped(format!("cannot run git: {e}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(BenchError::Failed(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// The content of the `k`th file: a small source file, distinct per file.
fn file_text(k: usize) -> String {
    format!(
        "//! File {k} of the amber-bench worktree repository.\n\npub fn f{k}(x: u64) -> u64 {{\n    x.wrapping_mul({}) ^ {k}\n}}\n",
        k * 2 + 1
    )
}

/// Creates the repository under `root`: [`REPO_FILES`] files in [`REPO_DIRS`] directories,
/// one commit.
fn create_repo(root: &Path) -> Result<Repo, BenchError> {
    let mut bytes = 0u64;
    for k in 0..REPO_FILES {
        let dir = root.join(format!("src/m{}", k % REPO_DIRS));
        std::fs::create_dir_all(&dir)
            .map_err(BenchError::io(format!("create {}", dir.display())))?;
        let file = dir.join(format!("f{k}.rs"));
        let text = file_text(k);
        bytes += text.len() as u64;
        std::fs::write(&file, text).map_err(BenchError::io(format!("write {}", file.display())))?;
    }
    git(root, &["init", "--quiet"])?;
    git(root, &["add", "--all"])?;
    git(
        root,
        &[
            "commit",
            "--quiet",
            "--message",
            "amber-bench worktree repository",
        ],
    )?;
    let path = std::fs::canonicalize(root)
        .map_err(BenchError::io(format!("resolve {}", root.display())))?
        .into_os_string()
        .into_string()
        .map_err(|p| BenchError::Failed(format!("repository path is not UTF-8: {p:?}")))?;
    Ok(Repo {
        path,
        files: REPO_FILES,
        bytes,
    })
}

/// One session of either kind: its `session/new` and `session/delete` round trips.
async fn one(client: &Client, cwd: &str, worktree: bool) -> Result<(f64, f64), BenchError> {
    let params = SessionNewParams {
        cwd: cwd.to_owned(),
        worktree: worktree.then_some(WorktreeRequest::Enabled(true)),
        ..SessionNewParams::default()
    };
    let started = Instant::now();
    let info = client.session_new(&params).await?;
    let new = ms(started.elapsed());
    let made: Option<PathBuf> = info.worktree.as_ref().map(|w| PathBuf::from(&w.path));
    match (&made, worktree) {
        (Some(path), true) if path.is_dir() => {}
        (Some(path), true) => {
            return Err(BenchError::Failed(format!(
                "session/new answered worktree {} but it is not a directory",
                path.display()
            )));
        }
        (None, true) => {
            return Err(BenchError::Failed(
                "session/new {worktree: true} answered no worktree".into(),
            ));
        }
        (Some(path), false) => {
            return Err(BenchError::Failed(format!(
                "a plain session/new made a worktree at {}",
                path.display()
            )));
        }
        (None, false) => {}
    }
    let delete = SessionDeleteParams {
        session_id: info.session_id.clone(),
        remove_worktree: worktree.then_some(true),
        ..SessionDeleteParams::default()
    };
    let started = Instant::now();
    client.request::<SessionDelete>(&delete).await?;
    let deleted = ms(started.elapsed());
    if let Some(path) = made.filter(|p| p.exists()) {
        return Err(BenchError::Failed(format!(
            "session/delete {{removeWorktree: true}} left the worktree at {}",
            path.display()
        )));
    }
    Ok((new, deleted))
}

/// The repository, the alternating sessions, the report.
pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let runs = s.args.runs(RUNS);
    let warmup = WARMUP.min(runs);
    let root = s.scratch.path().join("worktree-repo");
    std::fs::create_dir_all(&root).map_err(BenchError::io(format!("create {}", root.display())))?;
    let repo = tokio::task::spawn_blocking(move || create_repo(&root))
        .await
        .map_err(|e| BenchError::Failed(format!("worktree: {e}")))??;
    let client = s.client()?.clone();
    // [plain, worktree]
    let mut m = [Samples::default(), Samples::default()];
    for i in 0..warmup + runs {
        for k in 0..2 {
            let which = (i + k) % 2;
            let (new, delete) = one(&client, &repo.path, which == 1).await?;
            if i >= warmup {
                m[which].new.push(new);
                m[which].delete.push(delete);
            }
        }
    }
    report(&mut s.report, &repo, &m);
    Ok(())
}

fn report(r: &mut Report, repo: &Repo, m: &[Samples; 2]) {
    let [plain, wt] = m;
    r.section(&format!(
        "Worktree per session (a repository of {} files, one commit): session/new plain vs {{worktree: true}}",
        repo.files
    ));
    r.put(
        "worktree_repo_files_count",
        "files committed in the scratch repository",
        repo.files as f64,
    );
    r.put(
        "worktree_repo_kib",
        "their size",
        repo.bytes as f64 / 1024.0,
    );
    let rows = [
        (plain, "worktree_plain", "plain session"),
        (wt, "worktree", "session with a worktree"),
    ];
    for (samples, key, label) in rows {
        if let Some(n) = Summary::of(&samples.new) {
            r.put_summary(
                &format!("{key}_new_ms"),
                &format!("session/new round trip, {label}"),
                &n,
            );
        }
        if let Some(d) = Summary::of(&samples.delete) {
            let how = if key == "worktree" {
                " (removeWorktree: true)"
            } else {
                ""
            };
            r.put_summary(
                &format!("{key}_delete_ms"),
                &format!("session/delete round trip{how}, {label}"),
                &d,
            );
        }
    }
    if let (Some(a), Some(b)) = (Summary::of(&plain.new), Summary::of(&wt.new)) {
        r.put(
            "worktree_new_added_ms_median",
            "added to session/new by the worktree (worktree − plain), median",
            b.median - a.median,
        );
        r.put(
            "worktree_new_added_ms_p99",
            "added to session/new by the worktree (worktree − plain), p99",
            b.p99 - a.p99,
        );
    }
    if let (Some(a), Some(b)) = (Summary::of(&plain.delete), Summary::of(&wt.delete)) {
        r.put(
            "worktree_delete_added_ms_median",
            "added to session/delete by removing the worktree (worktree − plain), median",
            b.median - a.median,
        );
    }
    r.put(
        "worktree_sessions_count",
        "sessions of each kind (after a warm-up)",
        plain.new.len().min(wt.new.len()) as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_is_committed_and_clean() {
        let dir = tempfile::tempdir().unwrap();
        let repo = create_repo(dir.path()).unwrap();
        assert_eq!(repo.files, REPO_FILES);
        assert!(repo.bytes > (REPO_FILES * 50) as u64, "{}", repo.bytes);
        let out = Command::new("git")
            .args(["ls-files"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&out.stdout).lines().count();
        assert_eq!(listed, REPO_FILES);
        let status = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(status.stdout.is_empty(), "{:?}", status);
    }

    #[test]
    fn figures_per_kind_and_the_added_cost() {
        let plain = Samples {
            new: vec![1.0, 2.0, 1.5],
            delete: vec![0.5, 0.5, 1.0],
        };
        let wt = Samples {
            new: vec![20.0, 30.0, 25.0],
            delete: vec![10.0, 12.0, 11.0],
        };
        let repo = Repo {
            path: "/r".into(),
            files: 300,
            bytes: 2048,
        };
        let mut r = Report::default();
        report(&mut r, &repo, &[plain, wt]);
        assert_eq!(r.get("worktree_repo_files_count"), Some(300.0));
        assert_eq!(r.get("worktree_repo_kib"), Some(2.0));
        assert_eq!(r.get("worktree_plain_new_ms_median"), Some(1.5));
        assert_eq!(r.get("worktree_new_ms_median"), Some(25.0));
        assert_eq!(r.get("worktree_new_ms_p99"), Some(30.0));
        assert_eq!(r.get("worktree_delete_ms_median"), Some(11.0));
        assert_eq!(r.get("worktree_plain_delete_ms_p99"), Some(1.0));
        assert_eq!(r.get("worktree_new_added_ms_median"), Some(23.5));
        assert_eq!(r.get("worktree_new_added_ms_p99"), Some(28.0));
        assert_eq!(r.get("worktree_delete_added_ms_median"), Some(10.5));
        assert_eq!(r.get("worktree_sessions_count"), Some(3.0));
        let text = r.human();
        assert!(
            text.contains("### Worktree per session (a repository of 300 files"),
            "{text}"
        );
    }
}
