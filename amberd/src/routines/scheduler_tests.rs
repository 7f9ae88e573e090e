//! Unit tests of `scheduler.rs`: the missed-run policy, a tick firing each fire time once,
//! and the completion of a fire a stop cut short, against fake sessions, a clock the test
//! sets and UTC.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use amber_proto::sync::Locked;
use amber_proto::{MissedPolicy, RoutineDef, RoutineRun, RoutineSource, SessionInfo};

use super::*;
use crate::routines::cron::tests::{Zone, naive_epoch, w};
use crate::routines::store::{self, RunState};

struct TestClock(AtomicI64);

impl Clock for TestClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Sessions in memory: what was made, marked and prompted.
#[derive(Default)]
struct FakeSessions {
    sessions: Mutex<Vec<SessionInfo>>,
    prompts: Mutex<Vec<(String, String)>>,
}

fn info(id: &str, name: Option<&str>, routine: Option<RoutineRun>) -> SessionInfo {
    SessionInfo {
        session_id: id.into(),
        cwd: "/w".into(),
        mode: amber_proto::Mode::Write,
        model: "m".into(),
        title: String::new(),
        name: name.map(str::to_owned),
        state: amber_proto::SessionState::Idle,
        created_at: String::new(),
        updated_at: String::new(),
        usage: amber_proto::Usage::default(),
        provider: None,
        agent: None,
        sandbox: None,
        worktree: None,
        max_budget_usd: None,
        max_tokens_total: None,
        environment: None,
        parent: None,
        goal: None,
        routine,
    }
}

impl Sessions for FakeSessions {
    fn all(&self) -> Vec<SessionInfo> {
        self.sessions.locked().clone()
    }

    fn info(&self, id: &str) -> Option<SessionInfo> {
        self.all().into_iter().find(|s| s.session_id == id)
    }

    fn create(&self, params: SessionNewParams) -> Result<SessionInfo, String> {
        let mut sessions = self.sessions.locked();
        let id = format!("s{}", sessions.len() + 1);
        let made = info(&id, params.name.as_deref(), params.routine);
        sessions.push(made.clone());
        Ok(made)
    }

    fn mark(&self, id: &str, run: &RoutineRun) -> Result<(), String> {
        let mut sessions = self.sessions.locked();
        let session = sessions
            .iter_mut()
            .find(|s| s.session_id == id)
            .ok_or("gone")?;
        session.routine = Some(run.clone());
        Ok(())
    }

    fn prompt(&self, id: &str, turn_id: &str, text: String) -> Result<(), String> {
        let run = self.info(id).and_then(|s| s.routine).ok_or("not marked")?;
        assert_eq!(
            run.turn_id.as_deref(),
            Some(turn_id),
            "marked before prompted"
        );
        self.prompts.locked().push((id.to_owned(), text));
        Ok(())
    }
}

impl FakeSessions {
    /// The fire times of the sessions made, as RFC 3339.
    fn fire_times(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .filter_map(|s| s.routine.map(|r| r.fire_time))
            .collect()
    }
}

fn routine(name: &str, cron: &str, missed: MissedPolicy, session: Option<&str>) -> Routine {
    Routine {
        name: name.to_owned(),
        source: RoutineSource::Stored,
        def: RoutineDef {
            cron: cron.to_owned(),
            cwd: "/w".into(),
            prompt: format!("run {name}"),
            session: session.map(str::to_owned),
            worktree: false,
            environment: None,
            repo: None,
            git_ref: None,
            max_budget_usd: None,
            missed,
        },
        cron: Cron::parse(cron).unwrap(),
    }
}

fn at(text: &str) -> i64 {
    naive_epoch(w(text))
}

fn routines_at(dir: &std::path::Path, now: &str) -> (Routines, Arc<TestClock>) {
    let clock = Arc::new(TestClock(AtomicI64::new(at(now))));
    let routines = Routines::with(dir, clock.clone(), Box::new(Zone::utc()));
    (routines, clock)
}

#[test]
fn the_missed_run_policy_picks_the_runs() {
    let hourly = Cron::parse("0 * * * *").unwrap();
    let zone = Zone::utc();
    let fmt = |ts: &[i64]| -> Vec<String> { ts.iter().map(|t| rfc3339(*t, &zone)).collect() };
    // (policy, after, now, the runs, the newest due)
    type Case<'a> = (
        MissedPolicy,
        &'a str,
        &'a str,
        &'a [&'a str],
        Option<&'a str>,
    );
    let table: &[Case<'_>] = &[
        // Nothing due.
        (
            MissedPolicy::Latest,
            "2025-01-06T06:30",
            "2025-01-06T06:59",
            &[],
            None,
        ),
        // Due on time: every policy runs it.
        (
            MissedPolicy::Skip,
            "2025-01-06T06:30",
            "2025-01-06T07:01",
            &["2025-01-06T07:00:00+00:00"],
            Some("2025-01-06T07:00:00+00:00"),
        ),
        (
            MissedPolicy::Latest,
            "2025-01-06T06:30",
            "2025-01-06T07:01",
            &["2025-01-06T07:00:00+00:00"],
            Some("2025-01-06T07:00:00+00:00"),
        ),
        (
            MissedPolicy::All,
            "2025-01-06T06:30",
            "2025-01-06T07:01",
            &["2025-01-06T07:00:00+00:00"],
            Some("2025-01-06T07:00:00+00:00"),
        ),
        // Four fire times missed, the newest 30 minutes ago.
        (
            MissedPolicy::Skip,
            "2025-01-06T06:30",
            "2025-01-06T10:30",
            &[],
            Some("2025-01-06T10:00:00+00:00"),
        ),
        (
            MissedPolicy::Latest,
            "2025-01-06T06:30",
            "2025-01-06T10:30",
            &["2025-01-06T10:00:00+00:00"],
            Some("2025-01-06T10:00:00+00:00"),
        ),
        (
            MissedPolicy::All,
            "2025-01-06T06:30",
            "2025-01-06T10:30",
            &[
                "2025-01-06T07:00:00+00:00",
                "2025-01-06T08:00:00+00:00",
                "2025-01-06T09:00:00+00:00",
                "2025-01-06T10:00:00+00:00",
            ],
            Some("2025-01-06T10:00:00+00:00"),
        ),
        // Skip, with the newest of several on time: that one alone.
        (
            MissedPolicy::Skip,
            "2025-01-06T06:30",
            "2025-01-06T10:01",
            &["2025-01-06T10:00:00+00:00"],
            Some("2025-01-06T10:00:00+00:00"),
        ),
    ];
    for (policy, after, now, runs, newest) in table {
        let planned = plan(&hourly, *policy, at(after), at(now), &zone);
        assert_eq!(fmt(&planned.runs), *runs, "{policy:?} {after} → {now}");
        assert_eq!(
            planned.newest.map(|t| rfc3339(t, &zone)).as_deref(),
            *newest
        );
    }
    // `all` runs the newest ten; a year of a routine every minute is not walked minute by
    // minute to find them.
    let minutely = Cron::parse("* * * * *").unwrap();
    let minutes = plan(
        &minutely,
        MissedPolicy::All,
        at("2024-01-01T00:00"),
        at("2025-01-06T10:30"),
        &zone,
    );
    assert_eq!(minutes.runs.len(), MissedPolicy::MAX_RUNS);
    assert_eq!(minutes.runs.first().copied(), Some(at("2025-01-06T10:21")));
    assert_eq!(minutes.newest, Some(at("2025-01-06T10:30")));
    let yearly = Cron::parse("@yearly").unwrap();
    let years = plan(
        &yearly,
        MissedPolicy::All,
        at("2000-06-01T00:00"),
        at("2025-01-06T10:30"),
        &zone,
    );
    assert_eq!(years.runs.len(), MissedPolicy::MAX_RUNS);
    assert_eq!(years.runs.first().copied(), Some(at("2016-01-01T00:00")));
}

#[test]
fn a_tick_fires_each_fire_time_once_and_a_new_routine_counts_from_when_it_was_seen() {
    let dir = tempfile::tempdir().unwrap();
    let (routines, clock) = routines_at(dir.path(), "2025-01-06T06:59");
    let sessions = FakeSessions::default();
    let triage = [routine("triage", "0 7 * * 1-5", MissedPolicy::Latest, None)];

    assert!(routines.tick_with(&triage, &sessions).is_empty());
    clock.0.store(at("2025-01-06T07:00") + 30, Ordering::SeqCst);
    let fired = routines.tick_with(&triage, &sessions);
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0].fire_time, "2025-01-06T07:00:00+00:00");
    assert_eq!(fired[0].session_id.as_deref(), Some("s1"));
    assert_eq!(
        sessions.prompts.locked().as_slice(),
        [("s1".to_owned(), "run triage".to_owned())]
    );
    // The same time again, and a daemon started again on the same files: nothing more.
    assert!(routines.tick_with(&triage, &sessions).is_empty());
    let (again, _) = routines_at(dir.path(), "2025-01-06T07:01");
    assert!(again.tick_with(&triage, &sessions).is_empty());
    let state = store::load_state(dir.path()).unwrap();
    let run = state.routines["triage"].last_run.clone().unwrap();
    assert_eq!(
        (run.state, run.session_id.as_deref()),
        (RunState::Started, Some("s1"))
    );
    // The next weekday.
    clock.0.store(at("2025-01-07T07:00"), Ordering::SeqCst);
    assert_eq!(routines.tick_with(&triage, &sessions).len(), 1);
    assert_eq!(sessions.all().len(), 2);
}

#[test]
fn a_named_session_is_made_once_and_marked_with_each_fire() {
    let dir = tempfile::tempdir().unwrap();
    let (routines, clock) = routines_at(dir.path(), "2025-01-06T06:30");
    let sessions = FakeSessions::default();
    let nightly = [routine(
        "nightly",
        "0 * * * *",
        MissedPolicy::All,
        Some("nightly"),
    )];
    routines.tick_with(&nightly, &sessions);
    clock.0.store(at("2025-01-06T09:30"), Ordering::SeqCst);
    let fired = routines.tick_with(&nightly, &sessions);
    assert_eq!(fired.len(), 3, "{fired:?}");
    let all = sessions.all();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].name.as_deref(), Some("nightly"));
    assert_eq!(
        all[0].routine.as_ref().unwrap().fire_time,
        "2025-01-06T09:00:00+00:00"
    );
    assert_eq!(sessions.prompts.locked().len(), 3);
}

#[test]
fn a_fire_cut_short_is_completed_only_if_no_session_carries_it() {
    let triage = [routine("triage", "0 7 * * *", MissedPolicy::Latest, None)];
    let seven = at("2025-01-06T07:00");
    let starting = |dir: &std::path::Path| {
        let mut state = store::FireState::default();
        state.routines.insert(
            "triage".into(),
            store::RoutineState {
                since: seven - 3600,
                last_fire: Some(seven),
                last_run: Some(store::RunRecord {
                    fire_time: seven,
                    state: RunState::Starting,
                    session_id: None,
                    error: None,
                }),
            },
        );
        store::save_state(dir, &state).unwrap();
    };

    // Stopped before the session was made: recovery makes it, once.
    let dir = tempfile::tempdir().unwrap();
    starting(dir.path());
    let (routines, _) = routines_at(dir.path(), "2025-01-06T07:05");
    let sessions = FakeSessions::default();
    routines.recover_with(&triage, &sessions);
    assert_eq!(sessions.fire_times(), ["2025-01-06T07:00:00+00:00"]);
    assert!(routines.tick_with(&triage, &sessions).is_empty());
    routines.recover_with(&triage, &sessions);
    assert_eq!(sessions.all().len(), 1);

    // Stopped after the session was made: it counts, nothing is made again.
    let dir = tempfile::tempdir().unwrap();
    starting(dir.path());
    let (routines, _) = routines_at(dir.path(), "2025-01-06T07:05");
    let sessions = FakeSessions::default();
    let carried = RoutineRun {
        name: "triage".into(),
        // The same instant, written in another offset.
        fire_time: "2025-01-06T08:00:00+01:00".into(),
        turn_id: Some("turn_1".into()),
        stop_reason: None,
    };
    sessions
        .sessions
        .locked()
        .push(info("s9", None, Some(carried)));
    routines.recover_with(&triage, &sessions);
    assert_eq!(sessions.all().len(), 1);
    let state = store::load_state(dir.path()).unwrap();
    let run = state.routines["triage"].last_run.clone().unwrap();
    assert_eq!(
        (run.state, run.session_id.as_deref()),
        (RunState::Started, Some("s9"))
    );
}

#[test]
fn a_manual_run_leaves_the_schedule_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (routines, clock) = routines_at(dir.path(), "2025-01-06T06:59");
    let sessions = FakeSessions::default();
    let triage = routine("triage", "0 7 * * *", MissedPolicy::Latest, None);
    let fired = routines.run_now_with(&triage, &sessions);
    assert_eq!(fired.fire_time, "2025-01-06T06:59:00+00:00");
    clock.0.store(at("2025-01-06T07:00"), Ordering::SeqCst);
    assert_eq!(
        routines
            .tick_with(std::slice::from_ref(&triage), &sessions)
            .len(),
        1
    );
    assert_eq!(sessions.all().len(), 2);
}

#[test]
fn the_test_clock_reads_its_file() {
    assert_eq!(parse_instant(" 1736146800\n"), Some(1_736_146_800));
    assert_eq!(parse_instant("2025-01-06T07:00:00Z"), Some(1_736_146_800));
    assert_eq!(parse_instant("soon"), None);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("now");
    let clock = FileClock { path: path.clone() };
    std::fs::write(&path, "2025-01-06T07:00:00Z").unwrap();
    assert_eq!(clock.now(), 1_736_146_800);
    assert!(clock.is_controlled());
}

#[test]
fn a_routine_gone_from_the_config_starts_afresh_when_it_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let (routines, clock) = routines_at(dir.path(), "2025-01-06T06:30");
    let sessions = FakeSessions::default();
    let hourly = routine("hourly", "0 * * * *", MissedPolicy::All, None);
    let other = routine("other", "0 * * * *", MissedPolicy::All, None);
    routines.tick_with(&[hourly.clone(), other.clone()], &sessions);
    // A manual run of one keeps the other's state.
    routines.run_now_with(&hourly, &sessions);
    assert!(
        store::load_state(dir.path())
            .unwrap()
            .routines
            .contains_key("other")
    );
    // `other` leaves the config; back hours later, its missed hours do not count.
    routines.tick_with(std::slice::from_ref(&hourly), &sessions);
    clock.0.store(at("2025-01-06T10:30"), Ordering::SeqCst);
    routines.tick_with(std::slice::from_ref(&hourly), &sessions);
    let fired = routines.tick_with(&[hourly, other], &sessions);
    assert!(fired.is_empty(), "{fired:?}");
}
