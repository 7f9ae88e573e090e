//! Tests of the session manager's own rules: which session an id prefix or a name names,
//! and who may have a name.

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

/// Stored sessions: (id, name).
fn manager_named(sessions: &[(&str, Option<&str>)]) -> (SessionManager, tempfile::TempDir) {
    let ids: Vec<&str> = sessions.iter().map(|(id, _)| *id).collect();
    manager_over(&ids, |id, meta| {
        let (_, name) = sessions.iter().find(|(s, _)| *s == id).unwrap();
        meta.info.name = name.map(str::to_owned);
    })
}

#[test]
fn a_whole_id_wins_over_a_name_and_a_name_over_a_prefix() {
    let (manager, _dir) = manager_named(&[
        ("3f2a9c1d-aaaa", Some("fix-auth")),
        // Test ids need not look like real ones: an id that is also another's name.
        ("v2", None),
        ("77b0e4aa-cccc", Some("v2")),
        ("fixer-0001", None),
        ("88c1d2e3-dddd", Some("fixer")),
    ]);
    let table: &[(&str, Option<&str>)] = &[
        ("fix-auth", Some("3f2a9c1d-aaaa")),
        ("v2", None),
        ("fixer", Some("88c1d2e3-dddd")),
        ("fixer-", Some("fixer-0001")),
        ("x", None),
        ("fix-aut", None),
    ];
    for (given, whole) in table {
        assert_eq!(
            manager.resolve_id(given).unwrap().as_deref(),
            *whole,
            "{given}"
        );
    }
}

#[tokio::test]
async fn a_name_is_unique_kept_in_the_store_and_freed_on_rename_and_delete() {
    let first = "3f2a9c1d-0000-4000-8000-000000000001";
    let second = "77b0e4aa-1111-4111-8111-111111111111";
    let (manager, dir) = manager_named(&[(first, Some("fix-auth")), (second, None)]);

    let invalid = manager.rename(second, Some("my task".into())).unwrap_err();
    assert_eq!(
        invalid.to_string(),
        "invalid params: name: `my task` contains whitespace"
    );
    let taken = manager.rename(second, Some("fix-auth".into())).unwrap_err();
    assert!(matches!(taken, SessionError::InvalidParams(_)), "{taken}");
    assert_eq!(
        taken.to_string(),
        "invalid params: name: `fix-auth` is taken by session 3f2a9c1d"
    );
    // Its own name again: nothing changes.
    let same = manager.rename(first, Some("fix-auth".into())).unwrap();
    assert_eq!(same.name.as_deref(), Some("fix-auth"));

    let renamed = manager.rename(first, Some("login".into())).unwrap();
    assert_eq!(renamed.name.as_deref(), Some("login"));
    assert_eq!(manager.resolve_id("fix-auth").unwrap(), None, "freed");
    let given = manager.rename(second, Some("fix-auth".into())).unwrap();
    assert_eq!(given.name.as_deref(), Some("fix-auth"));
    assert_eq!(
        manager.resolve_id("fix-auth").unwrap().as_deref(),
        Some(second)
    );

    // An empty name clears it, as `None` does.
    assert_eq!(
        manager.rename(first, Some(String::new())).unwrap().name,
        None
    );
    assert_eq!(manager.resolve_id("login").unwrap(), None);

    // The store has the names: a manager started over it knows them.
    let store = amber_store::Store::open(dir.path()).unwrap();
    let names: std::collections::HashMap<String, Option<String>> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|m| (m.info.session_id, m.info.name))
        .collect();
    assert_eq!(names[first], None);
    assert_eq!(names[second].as_deref(), Some("fix-auth"));

    manager.delete(second).await.unwrap();
    assert_eq!(manager.resolve_id("fix-auth").unwrap(), None);
    let again = manager.rename(first, Some("fix-auth".into())).unwrap();
    assert_eq!(again.name.as_deref(), Some("fix-auth"));
}
