//! End-to-end: scheduled routines on the real binaries. The daemon's clock is the test's
//! (`AMBER_TEST_NOW_FILE`, UTC): the test writes a time and calls `routine/tick`. Checked: a
//! routine fires at its fire time and not before, in a session marked with the fire, whose
//! turn's result is recorded (`turn_completed`, then `routine_finished`, and `routine/list`);
//! the same fire time never fires twice; missed fire times follow each routine's policy; a
//! routine added with `amber-cli` survives a restart, fires from `amber-cli routine tick`, and
//! keeps the systemd timer's schedule up to date.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{Events, connect, run_bounded};
use amber_tests::{DaemonOptions, TestDaemon, bin_path};
use serde_json::{Value, json};
use tempfile::TempDir;

const REPLY: &str = "Triaged: 3 new issues, summary in TRIAGE.md";

/// A daemon on the test's clock, with routines of `routines_toml` (`{cwd}` is a workspace
/// of the test's).
struct Kit {
    daemon: TestDaemon,
    _mock: MockLlm,
    clock: PathBuf,
    cwd: PathBuf,
    _dir: TempDir,
}

impl Kit {
    async fn start(routines_toml: &str, now: &str) -> Kit {
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(|_| MockTurn::text(REPLY));
        let dir = tempfile::Builder::new()
            .prefix("amber-routines-")
            .tempdir()
            .unwrap();
        let clock = dir.path().join("now");
        std::fs::write(&clock, now).unwrap();
        std::fs::create_dir(dir.path().join("app")).unwrap();
        let cwd = dir.path().join("app").canonicalize().unwrap();
        let config = format!(
            "[[provider.prices]]\nmodel = \"mock-model\"\ninput = 1.0\noutput = 2.0\n\n\
             [agent]\nconfirm_finish = false\n{}",
            routines_toml.replace("{cwd}", &cwd.display().to_string())
        );
        let daemon = TestDaemon::spawn_with(DaemonOptions {
            base_url: Some(mock.base_url()),
            config_toml: config,
            env: vec![
                (
                    "AMBER_TEST_NOW_FILE".to_owned(),
                    clock.display().to_string(),
                ),
                ("TZ".to_owned(), "UTC".to_owned()),
            ],
        });
        Kit {
            daemon,
            _mock: mock,
            clock,
            cwd,
            _dir: dir,
        }
    }

    fn set_now(&self, now: &str) {
        std::fs::write(&self.clock, now).unwrap();
    }

    /// `routine/tick`'s runs.
    fn tick(&self) -> Vec<Value> {
        let ticked = self.daemon.rpc_ok("routine/tick", json!({}));
        ticked["fired"].as_array().cloned().unwrap()
    }

    fn routine(&self, name: &str) -> Value {
        let listed = self.daemon.rpc_ok("routine/list", json!({}));
        listed["routines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no routine {name}: {listed}"))
    }

    /// The routine's row once its last run's turn ended.
    fn finished(&self, name: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let row = self.routine(name);
            if row["lastStopReason"].is_string() {
                return row;
            }
            assert!(Instant::now() < deadline, "{name} never finished: {row}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn sessions(&self) -> Vec<Value> {
        let listed = self.daemon.rpc_ok("session/list", json!({}));
        listed["sessions"].as_array().cloned().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_routine_fires_on_its_schedule_and_records_its_result() {
    let kit = Kit::start(
        "[[routines]]\nname = \"triage\"\ncron = \"0 7 * * 1-5\"\ncwd = \"{cwd}\"\n\
         prompt = \"Triage new issues\"\nmax_budget_usd = 2.5\n",
        // A Monday, a minute before the fire.
        "2025-01-06T06:59:00Z",
    )
    .await;
    assert_eq!(kit.tick(), Vec::<Value>::new());
    assert!(kit.sessions().is_empty());
    let row = kit.routine("triage");
    assert_eq!(row["source"], "config");
    assert_eq!(row["nextFire"], "2025-01-06T07:00:00+00:00");
    assert_eq!(row["onCalendar"], json!(["Mon..Fri *-*-* 07:00:00"]));
    assert!(row.get("lastFire").is_none(), "{row}");

    kit.set_now("2025-01-06T07:00:30Z");
    let fired = kit.tick();
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["name"], "triage");
    assert_eq!(fired[0]["fireTime"], "2025-01-06T07:00:00+00:00");
    let session = fired[0]["sessionId"].as_str().unwrap().to_owned();

    // The result: the turn's `turn_completed`, then `routine_finished`, in that session.
    let client = connect(&kit.daemon).await;
    let mut events = Events::subscribe(&client, &session, Some(0)).await;
    let seen = events.until("routine_finished").await;
    let types: Vec<&str> = seen.iter().filter_map(|e| e["type"].as_str()).collect();
    let completed = types.iter().position(|t| *t == "turn_completed").unwrap();
    assert_eq!(&types[completed..], ["turn_completed", "routine_finished"]);
    assert_eq!(seen[completed]["stopReason"], "end_turn");
    let finished = seen.last().unwrap();
    assert_eq!(finished["name"], "triage");
    assert_eq!(finished["fireTime"], "2025-01-06T07:00:00+00:00");
    assert_eq!(finished["stopReason"], "end_turn");
    assert_eq!(finished["turnId"], seen[completed]["turnId"]);
    let replies: Vec<&Value> = seen
        .iter()
        .filter(|e| e["type"] == "message_completed" && e["role"] == "assistant")
        .collect();
    assert_eq!(replies.last().unwrap()["text"], REPLY);

    // The session knows which fire made it, and its budget is the routine's.
    let info = kit
        .daemon
        .rpc_ok("session/get", json!({"sessionId": session}))["session"]
        .clone();
    assert_eq!(info["routine"]["name"], "triage");
    assert_eq!(info["routine"]["fireTime"], "2025-01-06T07:00:00+00:00");
    assert_eq!(info["routine"]["stopReason"], "end_turn");
    assert_eq!(info["routine"]["turnId"], finished["turnId"]);
    assert_eq!(info["cwd"], kit.cwd.display().to_string());
    assert_eq!(info["maxBudgetUsd"], 2.5);

    let row = kit.finished("triage");
    assert_eq!(row["lastFire"], "2025-01-06T07:00:00+00:00");
    assert_eq!(row["lastSessionId"], session.as_str());
    assert_eq!(row["lastStopReason"], "end_turn");
    assert_eq!(row["nextFire"], "2025-01-07T07:00:00+00:00");

    // The same time again: that fire time is done.
    assert_eq!(kit.tick(), Vec::<Value>::new());
    kit.set_now("2025-01-06T12:00:00Z");
    assert_eq!(kit.tick(), Vec::<Value>::new());
    assert_eq!(kit.sessions().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn missed_runs_follow_the_policy() {
    let routine = |name: &str, missed: &str| {
        format!(
            "[[routines]]\nname = \"{name}\"\ncron = \"0 * * * *\"\ncwd = \"{{cwd}}\"\n\
             prompt = \"Report on the hour\"\nmissed = \"{missed}\"\n"
        )
    };
    let config: String = [("skip", "skip"), ("latest", "latest"), ("all", "all")]
        .iter()
        .map(|(name, missed)| routine(name, missed))
        .collect();
    let kit = Kit::start(&config, "2025-01-06T06:30:00Z").await;
    assert_eq!(kit.tick(), Vec::<Value>::new());

    // The daemon "was down" from 06:30 to 10:30: 07:00 to 10:00 were missed.
    kit.set_now("2025-01-06T10:30:00Z");
    let fired = kit.tick();
    let hours = |name: &str| -> Vec<String> {
        fired
            .iter()
            .filter(|f| f["name"] == name)
            .map(|f| {
                assert!(f["sessionId"].is_string(), "{f}");
                f["fireTime"].as_str().unwrap()[11..16].to_owned()
            })
            .collect()
    };
    let table: [(&str, &[&str]); 3] = [
        ("skip", &[]),
        ("latest", &["10:00"]),
        ("all", &["07:00", "08:00", "09:00", "10:00"]),
    ];
    for (policy, want) in table {
        assert_eq!(hours(policy), want, "{policy}: {fired:?}");
        // Each policy has handled them all: none is missed again.
        assert_eq!(
            kit.routine(policy)["lastFire"],
            "2025-01-06T10:00:00+00:00",
            "{policy}"
        );
    }
    let sessions = kit.sessions();
    assert_eq!(sessions.len(), 5, "{sessions:?}");
    for session in &sessions {
        assert!(session["routine"]["name"].is_string(), "{session}");
    }
    assert_eq!(kit.tick(), Vec::<Value>::new());

    // On time (the fire a minute ago), even `skip` runs it.
    kit.set_now("2025-01-06T11:01:00Z");
    let fired = kit.tick();
    let mut names: Vec<&str> = fired.iter().map(|f| f["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["all", "latest", "skip"]);
    for name in ["skip", "latest", "all"] {
        kit.finished(name);
    }
}

/// `amber-cli` with the daemon's environment; its exit code, stdout and stderr.
fn cli(daemon: &TestDaemon, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = daemon.cli();
    cmd.args(args);
    run_bounded(cmd)
}

fn unit_dir(daemon: &TestDaemon) -> PathBuf {
    daemon.dir.path().join("home/.config/systemd/user")
}

fn timer_schedule(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("amber-routines.timer"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("OnCalendar="))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_routine_added_by_the_cli_is_kept_across_a_restart() {
    let mut kit = Kit::start("", "2025-01-06T06:59:00Z").await;
    // The routines' units are installed: `routine add` and `rm` keep the timer's schedule.
    let units = unit_dir(&kit.daemon);
    std::fs::create_dir_all(&units).unwrap();
    std::fs::write(units.join("amber-routines.service"), "[Service]\n").unwrap();

    let cwd = kit.cwd.display().to_string();
    let (code, stdout, stderr) = cli(
        &kit.daemon,
        &[
            "routine",
            "add",
            "--cron",
            "0 7 * * *",
            "--cwd",
            &cwd,
            "--name",
            "nightly",
            "--missed",
            "all",
            "Write",
            "the",
            "notes",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout.trim(),
        "added routine nightly: next fire 2025-01-06T07:00:00+00:00"
    );
    assert!(stderr.contains("daemon-reload"), "{stderr}");
    assert_eq!(timer_schedule(&units), ["OnCalendar=*-*-* 07:00:00"]);

    // Refused before anything is kept: the message names the field.
    let (code, _, stderr) = cli(
        &kit.daemon,
        &["routine", "add", "--cron", "0 7 * *", "--cwd", &cwd, "p"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cron: "), "{stderr}");
    let (code, _, stderr) = cli(
        &kit.daemon,
        &[
            "routine", "add", "--cron", "@daily", "--cwd", &cwd, "--name", "nightly", "p",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("a routine named `nightly` exists"),
        "{stderr}"
    );

    // `install-systemd` writes the timer from the running daemon's routines.
    let installed = kit.daemon.dir.path().join("units");
    let amberd = bin_path("amberd").display().to_string();
    let (code, stdout, stderr) = cli(
        &kit.daemon,
        &[
            "daemon",
            "install-systemd",
            "--dir",
            &installed.display().to_string(),
            "--amberd",
            &amberd,
        ],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(timer_schedule(&installed), ["OnCalendar=*-*-* 07:00:00"]);
    let tick_unit = std::fs::read_to_string(installed.join("amber-routines.service")).unwrap();
    assert!(
        tick_unit.contains(&format!(
            "\nExecStart={} --no-autostart routine tick\n",
            bin_path("amber-cli").display()
        )),
        "{tick_unit}"
    );

    assert_eq!(kit.daemon.restart(), Some(0));
    let (code, stdout, stderr) = cli(&kit.daemon, &["routine", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    let row = &listed["routines"][0];
    assert_eq!(row["name"], "nightly");
    assert_eq!(row["source"], "stored");
    assert_eq!(row["prompt"], "Write the notes");
    assert_eq!(row["missed"], "all");
    assert_eq!(row["cwd"], cwd.as_str());

    // What the timer runs.
    kit.set_now("2025-01-06T07:00:10Z");
    let (code, stdout, stderr) = cli(&kit.daemon, &["routine", "tick"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("routine nightly fired for 2025-01-06T07:00:00+00:00: session "),
        "{stdout}"
    );
    let (code, stdout, _) = cli(&kit.daemon, &["routine", "tick"]);
    assert_eq!((code, stdout.as_str()), (Some(0), ""));
    let row = kit.finished("nightly");
    assert_eq!(row["lastStopReason"], "end_turn");
    let (_, table, _) = cli(&kit.daemon, &["routine", "list"]);
    assert!(table.contains("end_turn"), "{table}");

    // `run` fires now, whatever the schedule.
    let (code, stdout, stderr) = cli(&kit.daemon, &["routine", "run", "nightly"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("fired for 2025-01-06T07:00:10+00:00"),
        "{stdout}"
    );

    let (code, stdout, stderr) = cli(&kit.daemon, &["routine", "rm", "nightly"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "removed routine nightly");
    assert!(timer_schedule(&units).is_empty());
    let (code, _, stderr) = cli(&kit.daemon, &["routine", "rm", "nightly"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no routine named `nightly`"), "{stderr}");
    kit.daemon.restart();
    let listed = kit.daemon.rpc_ok("routine/list", json!({}));
    assert_eq!(listed["routines"], json!([]));
}

/// `session = "NAME"` fires into the same named session each time; `worktree = true` makes
/// each fire's session in a new git worktree of the workspace.
#[tokio::test(flavor = "multi_thread")]
async fn a_named_routine_reuses_its_session_and_a_worktree_routine_gets_its_own_checkout() {
    let kit = Kit::start(
        "[[routines]]\nname = \"standup\"\ncron = \"0 * * * *\"\ncwd = \"{cwd}\"\n\
         prompt = \"What changed?\"\nsession = \"standup\"\n\n\
         [[routines]]\nname = \"sweep\"\ncron = \"30 * * * *\"\ncwd = \"{cwd}\"\n\
         prompt = \"Sweep the TODOs\"\nworktree = true\n",
        "2025-01-06T06:59:00Z",
    )
    .await;
    // The workspace is a git repository with a commit, for the worktree.
    for args in [
        &["init", "-q", "-b", "main"][..],
        &[
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ] {
        amber_tests::steps::git(&kit.cwd, args);
    }
    let mut standup = Vec::new();
    for now in ["2025-01-06T07:00:10Z", "2025-01-06T08:00:10Z"] {
        kit.set_now(now);
        let fired = kit.tick();
        let fire = fired.iter().find(|f| f["name"] == "standup").unwrap();
        standup.push(fire["sessionId"].as_str().unwrap().to_owned());
        kit.finished("standup");
    }
    assert_eq!(standup[0], standup[1], "the named session is reused");
    let named = kit
        .daemon
        .rpc_ok("session/get", json!({"sessionId": standup[0]}))["session"]
        .clone();
    assert_eq!(named["name"], "standup", "{named}");

    kit.set_now("2025-01-06T08:30:10Z");
    let fired = kit.tick();
    let sweep = fired.iter().find(|f| f["name"] == "sweep").unwrap();
    let session = sweep["sessionId"].as_str().unwrap();
    let row = kit.finished("sweep");
    assert_eq!(row["lastStopReason"], "end_turn", "{row}");
    let info = kit
        .daemon
        .rpc_ok("session/get", json!({"sessionId": session}))["session"]
        .clone();
    let worktree = info["worktree"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("{info}"));
    assert_ne!(worktree, kit.cwd.display().to_string());
    assert_eq!(info["cwd"], worktree, "{info}");
}
