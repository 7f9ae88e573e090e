//! Tests of the session manager's own rules: which session an id prefix names.

use super::*;

/// A manager over a store holding these sessions (each made by `shape` from a draft
/// with its id and a workspace).
fn manager_over(
    sessions: &[&str],
    shape: impl Fn(&str, &mut SessionMeta),
) -> (SessionManager, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = amber_store::Store::open(dir.path()).unwrap();
    for id in sessions {
        let mut meta = draft_meta();
        meta.info.session_id = (*id).to_owned();
        meta.info.cwd = "/w".into();
        shape(id, &mut meta);
        drop(store.create(&meta).unwrap());
    }
    let mut services = Services::new(
        crate::config::Config::default(),
        &|_| None,
        dir.path().into(),
    )
    .unwrap();
    services.store = Some(store);
    (SessionManager::new(Arc::new(services)), dir)
}

/// A manager over a store holding sessions with exactly these ids.
fn manager_with(ids: &[&str]) -> (SessionManager, tempfile::TempDir) {
    manager_over(ids, |_, _| {})
}

#[test]
fn a_prefix_names_the_one_session_it_starts_and_no_more() {
    let (manager, _dir) = manager_with(&["3f2a9c1d-aaaa", "3f2a9c1d-bbbb", "77b0e4aa-cccc", "abc"]);
    // (given, the whole id it stands for; `None`: left as given)
    let table: &[(&str, Option<&str>)] = &[
        ("3f2a9c1d-aaaa", None),
        ("77b0", Some("77b0e4aa-cccc")),
        ("77b0e4aa", Some("77b0e4aa-cccc")),
        ("3f2a9c1d-b", Some("3f2a9c1d-bbbb")),
        // Too short to stand for anything, even a unique start.
        ("77b", None),
        ("ffff", None),
        ("abc", None),
    ];
    for (given, whole) in table {
        assert_eq!(
            manager.resolve_id(given).unwrap().as_deref(),
            *whole,
            "{given}"
        );
    }
    // Shared by two: refused, naming both.
    let err = manager.resolve_id("3f2a").unwrap_err();
    assert!(matches!(err, SessionError::InvalidParams(_)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("3f2a9c1d-aaaa") && message.contains("3f2a9c1d-bbbb"),
        "{message}"
    );
    // And the prefix reaches the session: its info, loading it.
    let whole = manager.resolve_id("77b0").unwrap().unwrap();
    assert_eq!(manager.info_of(&whole).unwrap().session_id, "77b0e4aa-cccc");
}

#[tokio::test]
async fn retention_deletes_old_idle_sessions_and_keeps_the_rest() {
    let day = 86_400;
    let ago = |secs: u64| {
        humantime::format_rfc3339_millis(std::time::SystemTime::now() - Duration::from_secs(secs))
            .to_string()
    };
    // (id, last updated, has a worktree)
    let sessions = [
        ("old", ago(40 * day), false),
        ("recent", ago(2 * day), false),
        ("old-with-worktree", ago(40 * day), true),
        ("unreadable-time", "not a time".to_owned(), false),
    ];
    let ids: Vec<&str> = sessions.iter().map(|(id, _, _)| *id).collect();
    let (manager, dir) = manager_over(&ids, |id, meta| {
        let (_, updated, worktree) = sessions.iter().find(|(s, _, _)| *s == id).unwrap();
        meta.info.updated_at.clone_from(updated);
        meta.info.worktree = worktree.then(|| amber_proto::WorktreeInfo {
            path: "/data/worktrees/x".into(),
            branch: "amber/x".into(),
        });
    });

    let deleted = manager.prune(Duration::from_secs(30 * day)).await;
    assert_eq!(deleted, ["old"]);
    for (id, _, _) in &sessions[1..] {
        assert!(manager.info_of(id).is_ok(), "{id} kept");
    }
    assert!(manager.info_of("old").is_err());
    assert!(dir.path().join("sessions/recent").exists());
    assert!(
        !dir.path().join("sessions/old").exists(),
        "gone from the store too"
    );
}
