//! The control plane's bookkeeping, without sockets: assignment by labels, capacity and the
//! pool's cap; runners that go silent, come back without their sessions, drain or fail.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use amber_executor::runner_wire::{Failure, HeartbeatParams, HelloParams};
use amber_proto::sync::Locked;
use amber_proto::{FleetInfo, FleetState};

use super::config::PoolConfig;
use super::{Fleet, FleetConfig, FleetSession};

/// What the fleet told one session, as words, and the numbers of its changes.
#[derive(Default)]
struct Told(Mutex<Vec<String>>, Mutex<Vec<u64>>);

impl FleetSession for Told {
    fn changed(&self, fleet: &FleetInfo, reason: Option<&str>, version: u64) {
        self.1.locked().push(version);
        let mut line = format!("{:?}", fleet.state).to_lowercase();
        if let Some(runner) = &fleet.runner {
            line.push_str(&format!(" {runner}"));
        }
        if let Some(reason) = reason {
            line.push_str(&format!(" ({reason})"));
        }
        self.0.locked().push(line);
    }
    fn runner_lost(&self, reason: &str) {
        self.0.locked().push(format!("lost ({reason})"));
    }
    fn park(&self) {
        self.0.locked().push("park".to_owned());
    }
}

fn fleet(cap: Option<u32>) -> Arc<Fleet> {
    Fleet::new(FleetConfig {
        pools: BTreeMap::from([(
            "default".to_owned(),
            PoolConfig {
                token_file: Some("/dev/null".into()),
                max_sessions: cap,
            },
        )]),
        ..FleetConfig::default()
    })
}

fn info(labels: &[(&str, &str)]) -> FleetInfo {
    FleetInfo {
        repo: "file:///r.git".to_owned(),
        git_ref: "main".to_owned(),
        setup: Vec::new(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        priority: 0,
        state: FleetState::Queued,
        runner: None,
        pool: None,
        attempts: 0,
        push: None,
    }
}

fn hello(
    fleet: &Fleet,
    runner: &str,
    capacity: u32,
    labels: &[(&str, &str)],
    running: &[&str],
) -> u64 {
    let params = HelloParams {
        protocol_version: amber_executor::wire::PROTOCOL_VERSION,
        runner: runner.to_owned(),
        pool: "default".to_owned(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        capacity,
        version: "0".to_owned(),
        hostname: runner.to_owned(),
        running: running.iter().map(|s| (*s).to_owned()).collect(),
    };
    fleet.hello("default", runner, params).unwrap().0
}

fn queue(fleet: &Fleet, ids: &[&str], labels: &[(&str, &str)]) -> Vec<Arc<Told>> {
    ids.iter()
        .map(|id| {
            let told = Arc::new(Told::default());
            fleet.enqueue(
                id,
                info(labels),
                Arc::clone(&told) as Arc<dyn FleetSession>,
                None,
            );
            told
        })
        .collect()
}

fn assigned(fleet: &Fleet, runner: &str, generation: u64, free: u32) -> Vec<String> {
    let (assigned, tells, current) = fleet.assign(runner, generation, free);
    assert!(current);
    for tell in tells {
        tell.tell();
    }
    assigned.into_iter().map(|a| a.session).collect()
}

#[test]
fn a_poll_gets_what_fits_the_runner_its_room_and_the_pools_cap() {
    let fleet = fleet(Some(3));
    queue(&fleet, &["a", "b", "c", "d"], &[]);
    queue(&fleet, &["gpu"], &[("gpu", "a100")]);
    let small = hello(&fleet, "small", 2, &[], &[]);
    let big = hello(&fleet, "big", 8, &[("gpu", "a100")], &[]);
    // Never more than it asked for, nor more than its capacity.
    assert_eq!(assigned(&fleet, "small", small, 5), ["a", "b"]);
    assert_eq!(assigned(&fleet, "small", small, 5), Vec::<String>::new());
    // The pool's cap (3) leaves the big runner one.
    assert_eq!(assigned(&fleet, "big", big, 8), ["c"]);
    assert_eq!(
        fleet.holder_of("c"),
        Some(("big".to_owned(), "default".to_owned()))
    );
    assert_eq!(fleet.holder_of("d"), None);
    fleet.release("a", "idle");
    assert_eq!(assigned(&fleet, "big", big, 8), ["d"]);
    let status = fleet.status();
    // The one left asks for no pool: it counts for the pool's demand.
    assert_eq!(status.queued, BTreeMap::from([("default".to_owned(), 1)]));
    assert_eq!(status.sessions.get("assigned"), Some(&3));
}

#[test]
fn a_silent_runner_is_gone_and_its_sessions_are_queued_again_saying_so() {
    let fleet = fleet(None);
    let told = queue(&fleet, &["a"], &[]);
    let g = hello(&fleet, "r1", 1, &[], &[]);
    assert_eq!(assigned(&fleet, "r1", g, 1), ["a"]);
    // Within the window nothing happens; past it the runner is gone.
    fleet.sweep(Instant::now() + Duration::from_secs(2));
    assert_eq!(
        fleet.holder_of("a"),
        Some(("r1".to_owned(), "default".to_owned()))
    );
    fleet.sweep(Instant::now() + Duration::from_secs(60));
    assert_eq!(fleet.holder_of("a"), None);
    assert_eq!(
        told[0].0.locked().clone(),
        [
            "queued",
            "assigned r1",
            "lost (runner r1 missed 3 heartbeats)",
            "queued (runner r1 missed 3 heartbeats)"
        ]
    );
    // Its next runner counts a second attempt.
    let g = hello(&fleet, "r2", 1, &[], &[]);
    assert_eq!(assigned(&fleet, "r2", g, 1), ["a"]);
    assert_eq!(fleet.status().sessions.get("assigned"), Some(&1));
}

#[test]
fn a_runner_saying_hello_again_drops_what_it_was_not_given_and_loses_what_it_forgot() {
    let fleet = fleet(None);
    let told = queue(&fleet, &["kept", "forgotten"], &[]);
    let g = hello(&fleet, "r1", 2, &[], &[]);
    assert_eq!(assigned(&fleet, "r1", g, 2), ["kept", "forgotten"]);
    // It dials again holding `kept` and a session amberd never gave it.
    let params = HelloParams {
        protocol_version: amber_executor::wire::PROTOCOL_VERSION,
        runner: "r1".to_owned(),
        pool: "default".to_owned(),
        labels: BTreeMap::new(),
        capacity: 2,
        version: "0".to_owned(),
        hostname: "r1".to_owned(),
        running: vec!["kept".to_owned(), "stranger".to_owned()],
    };
    let (_, answer) = fleet.hello("default", "r1", params).unwrap();
    assert_eq!(answer.release, ["stranger"]);
    assert_eq!(
        fleet.holder_of("kept"),
        Some(("r1".to_owned(), "default".to_owned()))
    );
    assert_eq!(fleet.holder_of("forgotten"), None);
    assert!(told[1].0.locked().iter().any(|t| t.starts_with("lost")));
    assert!(!told[0].0.locked().iter().any(|t| t.starts_with("lost")));
}

#[test]
fn a_hello_for_another_pool_or_runner_than_the_connection_is_refused() {
    let fleet = fleet(None);
    let mut params = HelloParams {
        protocol_version: amber_executor::wire::PROTOCOL_VERSION,
        runner: "r1".to_owned(),
        pool: "default".to_owned(),
        labels: BTreeMap::new(),
        capacity: 1,
        version: "0".to_owned(),
        hostname: "h".to_owned(),
        running: Vec::new(),
    };
    assert!(fleet.hello("other", "r1", params.clone()).is_err());
    assert!(fleet.hello("default", "r2", params.clone()).is_err());
    params.capacity = 0;
    assert!(fleet.hello("default", "r1", params.clone()).is_err());
    params.capacity = 1;
    params.labels.insert("bad label".to_owned(), "x".to_owned());
    assert!(fleet.hello("default", "r1", params).is_err());
}

#[test]
fn a_draining_runner_gets_nothing_and_a_failure_it_reports_fails_the_session() {
    let fleet = fleet(None);
    let told = queue(&fleet, &["a", "b"], &[]);
    let g = hello(&fleet, "r1", 2, &[], &[]);
    assert_eq!(assigned(&fleet, "r1", g, 1), ["a"]);
    let beat = HeartbeatParams {
        running: vec!["a".to_owned()],
        draining: true,
        park: Vec::new(),
        failed: vec![Failure {
            session: "a".to_owned(),
            reason: "git clone failed: not found".to_owned(),
        }],
    };
    let answer = fleet.beat("r1", g, beat).unwrap();
    assert_eq!(answer.release, ["a"], "a failed session is dropped");
    assert_eq!(
        told[0].0.locked().last().unwrap(),
        "failed (git clone failed: not found)"
    );
    assert_eq!(assigned(&fleet, "r1", g, 2), Vec::<String>::new());
    // An old connection's heartbeat is refused once a newer one said hello.
    let newer = hello(&fleet, "r1", 2, &[], &[]);
    assert!(fleet.beat("r1", g, HeartbeatParams::default()).is_err());
    assert_eq!(assigned(&fleet, "r1", newer, 2), ["b"]);
}

#[test]
fn a_session_restored_as_assigned_is_queued_again_when_its_runner_does_not_show_it() {
    let fleet = fleet(None);
    let told = Arc::new(Told::default());
    let mut on_runner = info(&[]);
    on_runner.state = FleetState::Assigned;
    on_runner.runner = Some("r1".to_owned());
    on_runner.pool = Some("default".to_owned());
    on_runner.attempts = 1;
    fleet.watch("a", on_runner, Arc::clone(&told) as Arc<dyn FleetSession>);
    assert_eq!(
        fleet.holder_of("a"),
        Some(("r1".to_owned(), "default".to_owned()))
    );
    fleet.sweep(Instant::now() + Duration::from_secs(60));
    assert_eq!(fleet.holder_of("a"), None);
    assert_eq!(
        told.0.locked().last().unwrap(),
        "queued (runner r1 did not come back after amberd restarted)"
    );
}

#[test]
fn a_heartbeat_sent_before_the_runner_took_an_assignment_does_not_lose_it() {
    let fleet = fleet(None);
    let told = queue(&fleet, &["a"], &[]);
    let g = hello(&fleet, "r1", 1, &[], &[]);
    assert_eq!(assigned(&fleet, "r1", g, 1), ["a"]);
    // The beat crossed the poll's answer: it does not list `a` yet.
    fleet.beat("r1", g, HeartbeatParams::default()).unwrap();
    assert_eq!(
        fleet.holder_of("a"),
        Some(("r1".to_owned(), "default".to_owned()))
    );
    let listed = HeartbeatParams {
        running: vec!["a".to_owned()],
        ..HeartbeatParams::default()
    };
    fleet.beat("r1", g, listed).unwrap();
    // Listed once, then missing: the runner lost it.
    fleet.beat("r1", g, HeartbeatParams::default()).unwrap();
    assert_eq!(fleet.holder_of("a"), None);
    assert!(
        told[0]
            .0
            .locked()
            .last()
            .unwrap()
            .starts_with("queued (runner r1 no longer holds it")
    );
}

#[test]
fn a_pools_demand_counts_what_asks_for_it_and_what_asks_for_no_pool() {
    let by_asked = BTreeMap::from([
        (String::new(), 2),
        ("gpu".to_owned(), 3),
        ("nowhere".to_owned(), 1),
    ]);
    assert_eq!(
        super::demand_of(&["default", "gpu"], by_asked),
        BTreeMap::from([
            ("default".to_owned(), 2),
            ("gpu".to_owned(), 5),
            ("nowhere".to_owned(), 1)
        ])
    );
    assert_eq!(
        super::demand_of(&[], BTreeMap::from([(String::new(), 2)])),
        BTreeMap::from([("any".to_owned(), 2)])
    );
}

#[test]
fn a_sessions_changes_are_numbered_in_the_order_the_fleet_made_them() {
    let fleet = fleet(None);
    let told = queue(&fleet, &["a"], &[]);
    let g = hello(&fleet, "r1", 1, &[], &[]);
    assert_eq!(assigned(&fleet, "r1", g, 1), ["a"]);
    fleet.release("a", "idle");
    fleet.enqueue(
        "a",
        info(&[]),
        Arc::clone(&told[0]) as Arc<dyn FleetSession>,
        None,
    );
    let versions = told[0].1.locked().clone();
    assert_eq!(versions.len(), 4, "{versions:?}");
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "queued, assigned, parked, queued in order: {versions:?}"
    );
}
