//! Checkpoints through the daemon. Two amberds run the same turns:
//! one with `[checkpoints] enabled = true`, one with `enabled = false`, each in generated
//! trees of its own (`--tree-files`), turns alternating between them; what checkpoints cost
//! is the difference. The daemon with checkpoints gets a fresh tree (new content) per first
//! turn; the other one's sessions share one, as nothing it does depends on the tree.
//!
//! - **first**: a fresh tree and session, the first turn with a file-changing call (`bash`
//!   appending a line to 10 files): turn time (prompt → `turn_completed`) on − off. It holds
//!   the first, full snapshot and the incremental one taken when the turn ends.
//! - **incremental**: later turns of that session, each appending to 10 other files:
//!   p50 on − p50 off. A turn takes two snapshots (before its first file-changing call and
//!   when it ends), so one checkpoint is estimated as half of that. The client's event times
//!   also split the two: `turn_started` → `tool_call_started` holds the first,
//!   `tool_call_completed` → `turn_completed` the second.
//! - **growth**: bytes added under `<data_dir>/checkpoints/objects` per such turn (the sum
//!   of the new files' sizes) against the size of the 10 files it changed; the snapshot
//!   manifests among the new blobs are told apart by the hashes the session's rows name.
//! - **read-only**: turns whose one call is `read`: on − off, and the store's growth.
//!
//! `checkpoint/list` must show one row per file-changing turn, each naming its 10 files, on
//! the daemon with checkpoints, and none on the other; otherwise the KPI fails, so it can
//! never report the cost of checkpoints that were not taken.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_client::{Client, ClientError, RawEventStream};
use amber_mock_llm::{Conversation, MockTurn};
use amber_proto::methods as m;
use amber_proto::{
    CheckpointInfo, CheckpointListParams, EventKind, SessionNewParams, StopReason, ToolStatus,
};
use futures::StreamExt;

use crate::args::{Args, Kpi};
use crate::daemon::{DaemonProc, DaemonSpec};
use crate::error::BenchError;
use crate::report::Report;
use crate::scenario::Scenario;
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::{task, tree};

/// Fresh trees (first checkpoints) by default, and at most: each costs a tree and a full
/// snapshot.
const FIRST_RUNS: usize = 3;
/// Incremental turns of each daemon.
const EDIT_RUNS: usize = 20;
/// Read-only turns of each daemon.
const READ_RUNS: usize = 10;
/// Files each file-changing turn appends a line to.
pub(crate) const FILES_PER_TURN: usize = 10;
/// Longest one turn may take.
const TURN_TIMEOUT: Duration = Duration::from_secs(120);
/// Every generated prompt starts with this; none contains another (`[edit 1]` is not in
/// `[edit 10]`), as the endpoint finds a conversation by its prompt.
const PROMPT_PREFIX: &str = "amber-bench checkpoint [";
/// The seeds of the samples' trees start here.
const SEED: u64 = 0xc4ec_0000;

/// The checkpoint goals and the tree size they are stated for.
pub(crate) const GOAL_FIRST_MS: f64 = 2000.0;
pub(crate) const GOAL_INCREMENTAL_MS: f64 = 50.0;
pub(crate) const GOAL_TREE_FILES: usize = 10_000;

const KIB: f64 = 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// How many turns of each kind a run takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    firsts: usize,
    edits: usize,
    reads: usize,
    files: usize,
}

impl Plan {
    /// `--runs N`: N incremental and N read-only turns, min(N, 3) fresh trees.
    fn of(args: &Args) -> Plan {
        Plan {
            firsts: args.runs(FIRST_RUNS).min(FIRST_RUNS),
            edits: args.runs(EDIT_RUNS),
            reads: args.runs(READ_RUNS),
            files: args.tree_files,
        }
    }
}

/// The seed of sample `j`'s trees: new content for the store each sample. Steps of 2, as
/// the tree's generator sets the seed's low bit (`SEED + 1` would repeat `SEED`'s tree, and
/// its first checkpoint would find every blob already stored).
fn seed(j: usize) -> u64 {
    SEED + 2 * j as u64
}

/// The prompt of the turn tagged `tag` (`first`, `edit 3`, `read 0`, `warm-up`).
fn prompt(tag: &str) -> String {
    format!("{PROMPT_PREFIX}{tag}]: run the scripted tool call.")
}

/// The files block `block` changes: 10 consecutive files of the tree, wrapping around.
fn block_files(block: usize, files: usize) -> Vec<String> {
    (0..FILES_PER_TURN)
        .map(|j| tree::rel_path((block * FILES_PER_TURN + j) % files.max(1)))
        .collect()
}

/// A `bash` command appending one line (naming `tag`) to each file of `block`. One
/// redirection per file, each to a literal path: amberd's policy asks for approval of a write
/// whose target it cannot resolve (`>> "$f"` in a loop), and the bench has no approver.
fn edit_command(block: usize, files: usize, tag: &str) -> String {
    block_files(block, files)
        .iter()
        .map(|path| format!("printf '// amber-bench checkpoint: {tag}\\n' >> {path}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The file read-only turn `k` reads.
fn read_path(k: usize, files: usize) -> String {
    tree::rel_path(k % files.max(1))
}

/// A conversation of one tool call, then a reply.
fn one_call(tag: &str, tool: &str, arguments: serde_json::Value) -> Conversation {
    Conversation {
        name: format!("checkpoint {tag}"),
        prompt: prompt(tag),
        turns: vec![
            MockTurn::tool_call(tool, &arguments),
            MockTurn::text("Done."),
        ],
    }
}

/// The scripted turns of the KPI (served by the embedded endpoint beside the scenarios):
/// the warm-up, the first turn (block 0), edit `k` (block `k + 1`) and read `k`. Empty when
/// the KPI is not selected. Refused if a prompt overlaps a scenario's.
pub(crate) fn conversations(
    args: &Args,
    scenarios: &[Scenario],
) -> Result<Vec<Conversation>, BenchError> {
    if !args.wants(Kpi::Checkpoint) {
        return Ok(Vec::new());
    }
    if let Some(s) = scenarios
        .iter()
        .find(|s| s.prompt.contains(PROMPT_PREFIX) || PROMPT_PREFIX.contains(&s.prompt))
    {
        return Err(BenchError::Scenario {
            origin: s.name.clone(),
            message: format!("its prompt overlaps the checkpoint KPI's ({PROMPT_PREFIX}…)"),
        });
    }
    let plan = Plan::of(args);
    let bash = |command: String| serde_json::json!({ "command": command });
    let mut all = vec![
        one_call("warm-up", "bash", bash("echo warm > warm.txt".to_owned())),
        one_call("first", "bash", bash(edit_command(0, plan.files, "first"))),
    ];
    for k in 0..plan.edits {
        let tag = format!("edit {k}");
        all.push(one_call(
            &tag,
            "bash",
            bash(edit_command(k + 1, plan.files, &tag)),
        ));
    }
    for k in 0..plan.reads {
        let path = read_path(k, plan.files);
        all.push(one_call(
            &format!("read {k}"),
            "read",
            serde_json::json!({ "path": path }),
        ));
    }
    Ok(all)
}

/// One daemon of the pair.
struct Side {
    daemon: DaemonProc,
    client: Client,
}

/// Which daemon: index 0 has checkpoints, 1 has not.
const ON: usize = 0;
const OFF: usize = 1;
const SIDES: [&str; 2] = ["on", "off"];

impl Side {
    async fn start(spec: &DaemonSpec, enabled: bool) -> Result<Side, BenchError> {
        let spec = DaemonSpec {
            extra_config: format!("[checkpoints]\nenabled = {enabled}\n"),
            ..spec.clone()
        };
        let daemon = DaemonProc::start(&spec, "checkpoint").await?;
        let client = Client::connect(task::connect_options(&daemon.socket)).await?;
        Ok(Side { daemon, client })
    }

    fn objects(&self) -> PathBuf {
        self.daemon.data_dir.join("checkpoints").join("objects")
    }

    /// The session's checkpoint rows file (amberd's `<data_dir>/sessions/<id>/checkpoints`).
    fn rows_file(&self, session: &str) -> PathBuf {
        self.daemon
            .data_dir
            .join("sessions")
            .join(session)
            .join("checkpoints")
    }

    async fn session(&self, dir: &Path) -> Result<String, BenchError> {
        let cwd = std::fs::canonicalize(dir)
            .map_err(BenchError::io(format!("resolve {}", dir.display())))?
            .into_os_string()
            .into_string()
            .map_err(|p| BenchError::Failed(format!("workspace path is not UTF-8: {p:?}")))?;
        let params = SessionNewParams {
            cwd,
            ..SessionNewParams::default()
        };
        Ok(self.client.session_new(&params).await?.session_id)
    }

    async fn rows(&self, session: &str) -> Result<Vec<CheckpointInfo>, BenchError> {
        let params = CheckpointListParams {
            session_id: session.to_owned(),
            all: false,
        };
        Ok(self
            .client
            .request::<m::CheckpointList>(&params)
            .await?
            .checkpoints)
    }
}

/// What the client saw of one turn.
#[derive(Debug, Default)]
struct Seen {
    started: Option<Instant>,
    tool_started: Option<Instant>,
    tool_completed: Option<Instant>,
    completed: Option<Instant>,
    tools: Vec<ToolStatus>,
    first_failure: Option<String>,
    stop: Option<StopReason>,
    error: Option<String>,
}

/// One turn's times, in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TurnTimes {
    /// Prompt sent → `turn_completed` received.
    total: f64,
    /// `turn_started` → `tool_call_started`: the snapshot before the call, if one is taken.
    before: f64,
    /// `tool_call_completed` → `turn_completed`: the snapshot when the turn ends.
    after: f64,
}

/// Follows one subscription until `turn_completed`.
async fn follow(mut events: RawEventStream) -> Result<Seen, ClientError> {
    let mut seen = Seen::default();
    while let Some(item) = events.next().await {
        let now = Instant::now();
        let Some(event) = item?.event else { continue };
        match event.kind {
            EventKind::TurnStarted { .. } => seen.started = Some(now),
            EventKind::ToolCallStarted { .. } => {
                seen.tool_started.get_or_insert(now);
            }
            EventKind::ToolCallCompleted { status, output, .. } => {
                seen.tool_completed = Some(now);
                seen.tools.push(status);
                if status != ToolStatus::Ok && seen.first_failure.is_none() {
                    seen.first_failure = Some(output);
                }
            }
            EventKind::TurnCompleted {
                stop_reason, error, ..
            } => {
                seen.stop = Some(stop_reason);
                seen.error = error.map(|e| format!("{}: {}", e.code, e.message));
                seen.completed = Some(now);
                break;
            }
            _ => {}
        }
    }
    Ok(seen)
}

/// Prompts `session` with `tag`'s prompt and waits for the turn; its times, or why it did
/// not run as scripted (one call, ok, `end_turn`).
async fn turn(
    client: &Client,
    session: &str,
    tag: &str,
) -> Result<Result<TurnTimes, String>, BenchError> {
    let events = client.subscribe_raw(session, None).await?;
    let reader = tokio::spawn(tokio::time::timeout(TURN_TIMEOUT, follow(events)));
    let sent = Instant::now();
    client.session_prompt(session, &prompt(tag)).await?;
    let seen = reader
        .await
        .map_err(|e| BenchError::Failed(format!("checkpoint: a subscriber task failed: {e}")))?
        .map_err(|_| {
            BenchError::Failed(format!("checkpoint {tag}: no turn_completed in 120 s"))
        })??;
    Ok(times(&seen, sent).ok_or_else(|| {
        format!(
            "{tag}: stop {:?}, tools {:?}: {}",
            seen.stop,
            seen.tools,
            seen.first_failure
                .as_deref()
                .or(seen.error.as_deref())
                .unwrap_or("")
                .trim()
        )
    }))
}

/// The turn's times if it ran as scripted: one call, ok, `end_turn`.
fn times(seen: &Seen, sent: Instant) -> Option<TurnTimes> {
    if seen.stop != Some(StopReason::EndTurn) || seen.tools != [ToolStatus::Ok] {
        return None;
    }
    let (started, tool_started, tool_completed, completed) = (
        seen.started?,
        seen.tool_started?,
        seen.tool_completed?,
        seen.completed?,
    );
    Some(TurnTimes {
        total: ms(completed.saturating_duration_since(sent)),
        before: ms(tool_started.saturating_duration_since(started)),
        after: ms(completed.saturating_duration_since(tool_completed)),
    })
}

/// The files under `dir` (relative paths, `/`-separated) and their sizes; empty if `dir`
/// does not exist. The store's `tmp/` (blobs being written) is left out. A file in `known`
/// keeps its size there without a `stat` (blobs are immutable), so listing a store of tens
/// of thousands of blobs after every turn costs directory reads, not a `stat` per blob.
fn store_files(
    dir: &Path,
    known: &BTreeMap<String, u64>,
) -> Result<BTreeMap<String, u64>, BenchError> {
    let mut out = BTreeMap::new();
    let mut pending = vec![(dir.to_owned(), String::new())];
    while let Some((path, rel)) = pending.pop() {
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(BenchError::Io {
                    what: format!("list {}", path.display()),
                    source: e,
                });
            }
        };
        for entry in entries {
            let entry = entry.map_err(BenchError::io(format!("list {}", path.display())))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if let Some(size) = known.get(&rel) {
                out.insert(rel, *size);
                continue;
            }
            let meta = entry
                .metadata()
                .map_err(BenchError::io(format!("stat {}", entry.path().display())))?;
            if meta.is_dir() {
                if rel != "tmp" {
                    pending.push((entry.path(), rel));
                }
            } else {
                out.insert(rel, meta.len());
            }
        }
    }
    Ok(out)
}

/// The files in `after` that were not in `before` (blobs are immutable: a name seen
/// before holds the same bytes).
fn added(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    after
        .iter()
        .filter(|(path, _)| !before.contains_key(*path))
        .map(|(path, size)| (path.clone(), *size))
        .collect()
}

/// The store paths (`<2 hex>/<62 hex>`) of the snapshots a session's rows file names.
fn snapshot_blobs(rows: &str) -> HashSet<String> {
    rows.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| matches!(v["k"].as_str(), Some("before" | "after")))
        .filter_map(|v| v["snapshot"].as_str().map(str::to_owned))
        .filter(|hex| hex.len() == 64 && hex.is_char_boundary(2))
        .map(|hex| format!("{}/{}", &hex[..2], &hex[2..]))
        .collect()
}

/// One turn's growth of the store.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Growth {
    bytes: u64,
    blobs: usize,
    /// The part that is snapshot manifests, when the rows could be read.
    manifests: Option<u64>,
}

impl Growth {
    fn of(added: &[(String, u64)], manifests: Option<&HashSet<String>>) -> Growth {
        Growth {
            bytes: added.iter().map(|(_, size)| size).sum(),
            blobs: added.len(),
            manifests: manifests.map(|set| {
                added
                    .iter()
                    .filter(|(path, _)| set.contains(path))
                    .map(|(_, size)| size)
                    .sum()
            }),
        }
    }
}

/// One kind of turn's times on one daemon.
#[derive(Debug, Default, Clone)]
struct Turns {
    total: Vec<f64>,
    before: Vec<f64>,
    after: Vec<f64>,
}

impl Turns {
    fn push(&mut self, t: TurnTimes) {
        self.total.push(t.total);
        self.before.push(t.before);
        self.after.push(t.after);
    }
}

/// Everything measured; [`report`] turns it into figures.
#[derive(Debug, Default)]
struct Samples {
    tree_files: usize,
    tree_bytes: u64,
    /// Indexed by [`ON`] / [`OFF`].
    first: [Turns; 2],
    edit: [Turns; 2],
    read: [Turns; 2],
    /// The store's growth over each first turn, edit turn and read-only turn (checkpoints on).
    first_growth: Vec<Growth>,
    edit_growth: Vec<Growth>,
    read_growth: Vec<Growth>,
    /// The size of the files each edit turn changed, after it.
    changed: Vec<u64>,
    rows: usize,
    rows_expected: usize,
    off_rows: usize,
    off_store: u64,
    failures: usize,
}

/// Median of `on` − median of `off`, if both were measured.
fn median_delta(on: &[f64], off: &[f64]) -> Option<f64> {
    Some(Summary::of(on)?.median - Summary::of(off)?.median)
}

fn report(r: &mut Report, m: &Samples) {
    r.section(&format!(
        "checkpoints through amberd ({}-file tree, {FILES_PER_TURN} files changed per turn, checkpoints on vs off)",
        m.tree_files
    ));
    r.put(
        "checkpoint_tree_files_count",
        "files in the tree",
        m.tree_files as f64,
    );
    r.put(
        "checkpoint_tree_mib",
        "tree size",
        m.tree_bytes as f64 / MIB,
    );
    first_figures(r, m);
    edit_figures(r, m);
    growth_figures(r, m);
    read_figures(r, m);
    r.put(
        "checkpoint_rows_count",
        "checkpoint/list rows, checkpoints on (every session)",
        m.rows as f64,
    );
    r.put(
        "checkpoint_rows_expected_count",
        "file-changing turns run, checkpoints on",
        m.rows_expected as f64,
    );
    r.put(
        "checkpoint_off_rows_count",
        "checkpoint/list rows, checkpoints off",
        m.off_rows as f64,
    );
    r.put(
        "checkpoint_off_store_kib",
        "checkpoint store, checkpoints off",
        m.off_store as f64 / KIB,
    );
    r.put(
        "checkpoint_failures_count",
        "turns that did not end end_turn with their one call ok (both daemons)",
        m.failures as f64,
    );
}

fn first_figures(r: &mut Report, m: &Samples) {
    let [on, off] = &m.first;
    let what = "first file-changing turn of a fresh session (prompt → turn_completed)";
    if let (Some(a), Some(b)) = (Summary::of(&on.total), Summary::of(&off.total)) {
        r.put_median(
            "checkpoint_first_turn_on_ms",
            &format!("{what}, checkpoints on"),
            &a,
        );
        r.put_median(
            "checkpoint_first_turn_off_ms",
            &format!("{what}, checkpoints off"),
            &b,
        );
        r.put(
            "checkpoint_first_ms_median",
            "added to that turn by checkpoints (on − off, medians): the first, full snapshot and the one after the turn",
            a.median - b.median,
        );
    }
    if let Some(d) = median_delta(&on.before, &off.before) {
        r.put(
            "checkpoint_first_before_ms_median",
            "of which before its call (turn_started → tool_call_started, on − off): the first snapshot",
            d,
        );
    }
    let bytes: Vec<f64> = m
        .first_growth
        .iter()
        .map(|g| g.bytes as f64 / MIB)
        .collect();
    if let Some(g) = Summary::of(&bytes) {
        r.put_median(
            "checkpoint_first_store_mib",
            "store growth over that turn (the tree's contents and two snapshot manifests)",
            &g,
        );
    }
    let blobs: Vec<f64> = m.first_growth.iter().map(|g| g.blobs as f64).collect();
    if let Some(b) = Summary::of(&blobs) {
        r.put_median(
            "checkpoint_first_blobs_count",
            "new blobs over that turn",
            &b,
        );
    }
    r.put(
        "checkpoint_first_runs_count",
        "fresh trees (one first turn per daemon each)",
        on.total.len().min(off.total.len()) as f64,
    );
}

fn edit_figures(r: &mut Report, m: &Samples) {
    let [on, off] = &m.edit;
    let (Some(a), Some(b)) = (Summary::of(&on.total), Summary::of(&off.total)) else {
        return;
    };
    let what = format!("later turn changing {FILES_PER_TURN} files with `bash`");
    r.put_summary(
        "checkpoint_edit_turn_on_ms",
        &format!("{what}, checkpoints on"),
        &a,
    );
    r.put_summary(
        "checkpoint_edit_turn_off_ms",
        &format!("{what}, checkpoints off"),
        &b,
    );
    let added = a.median - b.median;
    r.put(
        "checkpoint_edit_added_ms_median",
        "added to such a turn by checkpoints (p50 on − p50 off): two snapshots, before the call and after the turn",
        added,
    );
    r.put(
        "checkpoint_incremental_ms_median",
        "one incremental checkpoint, estimated as half of that",
        added / 2.0,
    );
    if let Some(d) = median_delta(&on.before, &off.before) {
        r.put(
            "checkpoint_incremental_before_ms_median",
            "the snapshot before the call (turn_started → tool_call_started, p50 on − p50 off)",
            d,
        );
    }
    if let Some(d) = median_delta(&on.after, &off.after) {
        r.put(
            "checkpoint_incremental_after_ms_median",
            "the snapshot after the turn (tool_call_completed → turn_completed, p50 on − p50 off)",
            d,
        );
    }
    r.put(
        "checkpoint_edit_runs_count",
        "such turns per daemon",
        a.n.min(b.n) as f64,
    );
}

fn growth_figures(r: &mut Report, m: &Samples) {
    let kib = |v: u64| v as f64 / KIB;
    let changed: Vec<f64> = m.changed.iter().map(|c| kib(*c)).collect();
    if let Some(c) = Summary::of(&changed) {
        r.put_median(
            "checkpoint_changed_kib",
            &format!("size of the {FILES_PER_TURN} files such a turn changed (their new versions)"),
            &c,
        );
    }
    let growth: Vec<f64> = m.edit_growth.iter().map(|g| kib(g.bytes)).collect();
    let Some(g) = Summary::of(&growth) else {
        return;
    };
    r.put_summary(
        "checkpoint_growth_kib",
        "store growth per such turn (new files under checkpoints/objects)",
        &g,
    );
    let blobs: Vec<f64> = m.edit_growth.iter().map(|g| g.blobs as f64).collect();
    if let Some(b) = Summary::of(&blobs) {
        r.put_median(
            "checkpoint_growth_blobs_count",
            "new blobs per such turn",
            &b,
        );
    }
    let manifests: Option<Vec<(f64, f64)>> = m
        .edit_growth
        .iter()
        .map(|g| g.manifests.map(|s| (kib(s), kib(g.bytes - s.min(g.bytes)))))
        .collect();
    if let Some(split) = manifests {
        let (snapshots, content): (Vec<f64>, Vec<f64>) = split.into_iter().unzip();
        if let (Some(s), Some(c)) = (Summary::of(&snapshots), Summary::of(&content)) {
            r.put_median(
                "checkpoint_growth_manifest_kib",
                "of which the turn's snapshot manifests",
                &s,
            );
            r.put_median(
                "checkpoint_growth_content_kib",
                "of which file contents",
                &c,
            );
        }
    }
    let ratios: Vec<f64> = m
        .edit_growth
        .iter()
        .zip(&m.changed)
        .filter(|(_, c)| **c > 0)
        .map(|(g, c)| g.bytes as f64 / *c as f64)
        .collect();
    if let Some(x) = Summary::of(&ratios) {
        r.put_median(
            "checkpoint_growth_ratio",
            "store growth / size of the changed files, per turn",
            &x,
        );
    }
}

fn read_figures(r: &mut Report, m: &Samples) {
    let [on, off] = &m.read;
    let (Some(a), Some(b)) = (Summary::of(&on.total), Summary::of(&off.total)) else {
        return;
    };
    let what = "turn whose one call is `read`";
    r.put_summary(
        "checkpoint_read_turn_on_ms",
        &format!("{what}, checkpoints on"),
        &a,
    );
    r.put_summary(
        "checkpoint_read_turn_off_ms",
        &format!("{what}, checkpoints off"),
        &b,
    );
    r.put(
        "checkpoint_read_added_ms_median",
        "added to such a turn by checkpoints (p50 on − p50 off): ≈ 0 expected",
        a.median - b.median,
    );
    let most = m.read_growth.iter().map(|g| g.bytes).max().unwrap_or(0);
    r.put(
        "checkpoint_read_growth_kib_max",
        "store growth over such a turn, largest: 0 expected",
        most as f64 / KIB,
    );
    r.put(
        "checkpoint_read_runs_count",
        "such turns per daemon",
        a.n.min(b.n) as f64,
    );
}

/// Why the rows of the daemon with checkpoints are not one per file-changing turn, each
/// naming the turn's files, if they are not. `expected[i]` is session `i`'s turn count.
fn check_rows(
    sessions: &[(Vec<CheckpointInfo>, usize)],
    files_per_turn: usize,
) -> Result<(), String> {
    for (i, (rows, expected)) in sessions.iter().enumerate() {
        if rows.len() != *expected {
            return Err(format!(
                "session {i}: checkpoint/list has {} row(s) for {expected} file-changing turn(s)",
                rows.len()
            ));
        }
        if let Some(row) = rows.iter().find(|r| r.changed.len() != files_per_turn) {
            return Err(format!(
                "session {i}: the row of turn {} lists {} changed path(s), not {files_per_turn}",
                row.turn,
                row.changed.len()
            ));
        }
    }
    Ok(())
}

/// Sizes of the files of `block` in the tree at `root`.
fn block_bytes(root: &Path, block: usize, files: usize) -> Result<u64, BenchError> {
    block_files(block, files)
        .iter()
        .map(|rel| {
            let path = root.join(rel);
            std::fs::metadata(&path)
                .map(|m| m.len())
                .map_err(BenchError::io(format!("stat {}", path.display())))
        })
        .sum()
}

/// A blocking step off the runtime's threads.
async fn blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, BenchError> + Send + 'static,
) -> Result<T, BenchError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BenchError::Failed(format!("checkpoint: {what}: {e}")))?
}

/// The measurement in progress: the two daemons, their sessions, what the store held after
/// the last turn of the daemon with checkpoints, and the samples.
struct Run {
    plan: Plan,
    root: PathBuf,
    sides: [Side; 2],
    /// Per side, the sessions made; the first one also runs the later turns.
    sessions: [Vec<String>; 2],
    store: BTreeMap<String, u64>,
    m: Samples,
    first_failure: Option<String>,
    /// Per edit and read-only turn, the files the store gained (checkpoints on).
    edit_added: Vec<Vec<(String, u64)>>,
    read_added: Vec<Vec<(String, u64)>>,
}

impl Run {
    /// The tree of the daemon with checkpoints for sample `j`; the other daemon's sessions
    /// all share one tree, as nothing it does depends on a tree being new.
    fn tree(&self, side: usize, j: usize) -> PathBuf {
        match side {
            ON => self.root.join(format!("tree-on-{j}")),
            _ => self.root.join("tree-off"),
        }
    }

    async fn generate(&mut self, dir: PathBuf, j: usize) -> Result<(), BenchError> {
        let files = self.plan.files;
        let info = blocking("generate a tree", move || {
            tree::generate(&dir, files, seed(j))
        })
        .await?;
        self.m.tree_bytes = info.bytes;
        Ok(())
    }

    /// Runs `tag`'s turn in `session` of `side`; its times, if it ran as scripted.
    async fn turn(
        &mut self,
        side: usize,
        session: &str,
        tag: &str,
    ) -> Result<Option<TurnTimes>, BenchError> {
        match turn(&self.sides[side].client, session, tag).await? {
            Ok(t) => Ok(Some(t)),
            Err(why) => {
                self.m.failures += 1;
                self.first_failure.get_or_insert(why);
                Ok(None)
            }
        }
    }

    /// The files the store gained since the last call.
    async fn store_growth(&mut self) -> Result<Vec<(String, u64)>, BenchError> {
        let dir = self.sides[ON].objects();
        let known = std::mem::take(&mut self.store);
        let (now, known) = blocking("list the store", move || {
            let now = store_files(&dir, &known)?;
            Ok((now, known))
        })
        .await?;
        let new = added(&known, &now);
        self.store = now;
        Ok(new)
    }

    /// An unmeasured turn in a small workspace on each daemon: the first turn of a daemon
    /// pays one-off costs (the sandbox probe, opening the store).
    async fn warm_up(&mut self) -> Result<(), BenchError> {
        for side in [ON, OFF] {
            let dir = self.root.join(format!("warm-{}", SIDES[side]));
            std::fs::create_dir_all(&dir)
                .map_err(BenchError::io(format!("create {}", dir.display())))?;
            let session = self.sides[side].session(&dir).await?;
            self.turn(side, &session, "warm-up").await?;
        }
        self.store_growth().await?;
        Ok(())
    }

    /// Sample `j` of the first checkpoint: a new session on each daemon, its first turn.
    async fn first(&mut self, j: usize) -> Result<(), BenchError> {
        for k in 0..2 {
            let side = (j + k) % 2;
            let session = self.sides[side].session(&self.tree(side, j)).await?;
            if let Some(t) = self.turn(side, &session, "first").await? {
                self.m.first[side].push(t);
            }
            if side == ON {
                let new = self.store_growth().await?;
                self.m.first_growth.push(Growth::of(&new, None));
            }
            self.sessions[side].push(session);
        }
        Ok(())
    }

    /// The incremental turns, then the read-only ones, in the first sessions.
    async fn later_turns(&mut self) -> Result<(), BenchError> {
        let first = [0, 1].map(|side| self.sessions[side].first().cloned());
        let [Some(on), Some(off)] = first else {
            return Err(BenchError::Failed("checkpoint: no first session".into()));
        };
        let sessions = [on, off];
        for k in 0..self.plan.edits {
            for o in 0..2 {
                let side = (k + o) % 2;
                let t = self
                    .turn(side, &sessions[side], &format!("edit {k}"))
                    .await?;
                if let Some(t) = t {
                    self.m.edit[side].push(t);
                }
                if side == ON {
                    let new = self.store_growth().await?;
                    self.edit_added.push(new);
                    let changed = block_bytes(&self.tree(ON, 0), k + 1, self.plan.files)?;
                    self.m.changed.push(changed);
                }
            }
        }
        for k in 0..self.plan.reads {
            for o in 0..2 {
                let side = (k + o) % 2;
                let t = self
                    .turn(side, &sessions[side], &format!("read {k}"))
                    .await?;
                if let Some(t) = t {
                    self.m.read[side].push(t);
                }
                if side == ON {
                    let new = self.store_growth().await?;
                    self.read_added.push(new);
                }
            }
        }
        Ok(())
    }
}

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    if s.args.base_url.is_some() {
        return Err(BenchError::Skipped(
            "its turns are scripted: it needs the embedded endpoint (not available with --base-url)"
                .into(),
        ));
    }
    let plan = Plan::of(&s.args);
    if plan.files < FILES_PER_TURN {
        return Err(BenchError::Usage(format!(
            "--tree-files {}: the checkpoint KPI changes {FILES_PER_TURN} files per turn",
            plan.files
        )));
    }
    let mut run = Run {
        plan,
        root: s.scratch.path().join("checkpoint"),
        sides: [
            Side::start(&s.spec, true).await?,
            Side::start(&s.spec, false).await?,
        ],
        sessions: [Vec::new(), Vec::new()],
        store: BTreeMap::new(),
        m: Samples {
            tree_files: plan.files,
            ..Samples::default()
        },
        first_failure: None,
        edit_added: Vec::new(),
        read_added: Vec::new(),
    };
    run.warm_up().await?;
    // The first sample, then the later turns in its sessions, then the other samples'
    // first turns, each on a tree of its own (removed once used, to spare the disk).
    run.generate(run.tree(OFF, 0), 0).await?;
    for j in 0..plan.firsts {
        run.generate(run.tree(ON, j), j).await?;
        run.first(j).await?;
        if j == 0 {
            run.later_turns().await?;
        } else {
            let _ = std::fs::remove_dir_all(run.tree(ON, j));
        }
    }
    // One call per turn; a turn that did not run as scripted counts as a failed call.
    let calls = 2 * (1 + plan.firsts + plan.edits + plan.reads);
    s.count_tools(calls.saturating_sub(run.m.failures), calls);

    // The snapshot manifests among the new blobs: the hashes the first session's rows name.
    let Run {
        sides,
        sessions,
        mut m,
        first_failure,
        edit_added,
        read_added,
        ..
    } = run;
    let rows_file = sessions[ON].first().map(|id| sides[ON].rows_file(id));
    let manifests = match rows_file.map(std::fs::read_to_string) {
        Some(Ok(text)) => Some(snapshot_blobs(&text)),
        other => {
            let why = match other {
                Some(Err(e)) => e.to_string(),
                _ => "no session".to_owned(),
            };
            s.report.note(format!(
                "checkpoint: the session's rows file cannot be read ({why}): store growth not split into manifests and contents"
            ));
            None
        }
    };
    m.edit_growth = edit_added
        .iter()
        .map(|a| Growth::of(a, manifests.as_ref()))
        .collect();
    m.read_growth = read_added.iter().map(|a| Growth::of(a, None)).collect();

    // Verification: one row per file-changing turn with checkpoints, none without.
    let mut listed = Vec::new();
    for (i, session) in sessions[ON].iter().enumerate() {
        let expected = if i == 0 { 1 + plan.edits } else { 1 };
        listed.push((sides[ON].rows(session).await?, expected));
    }
    m.rows = listed.iter().map(|(rows, _)| rows.len()).sum();
    m.rows_expected = listed.iter().map(|(_, n)| n).sum();
    for session in &sessions[OFF] {
        m.off_rows += sides[OFF].rows(session).await?.len();
    }
    let off_objects = sides[OFF].objects();
    m.off_store = blocking("list the store", move || {
        store_files(&off_objects, &BTreeMap::new())
    })
    .await?
    .values()
    .sum();

    report(&mut s.report, &m);
    if let Some(g) = m.first_growth.iter().find(|g| g.blobs < plan.files) {
        s.report.note(format!(
            "checkpoint: a first checkpoint wrote {} blobs for {} files: the store already held some of the tree",
            g.blobs, plan.files
        ));
    }
    if let Some(why) = &first_failure {
        s.report.note(format!(
            "checkpoint: {} turn(s) failed; first: {why}",
            m.failures
        ));
    }
    for side in sides {
        blocking("stop a daemon", move || {
            side.daemon.stop();
            Ok(())
        })
        .await?;
    }
    if m.failures > 0 {
        return Err(BenchError::Failed(format!(
            "{} turn(s) did not run as scripted",
            m.failures
        )));
    }
    check_rows(&listed, FILES_PER_TURN).map_err(|why| {
        BenchError::Failed(format!(
            "the daemon with checkpoints did not record them as expected, so the figures measure nothing: {why}"
        ))
    })?;
    if m.off_rows > 0 || m.off_store > 0 {
        return Err(BenchError::Failed(format!(
            "the daemon with checkpoints off recorded {} row(s) and {} bytes of store",
            m.off_rows, m.off_store
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::{ChangeStatus, ChangedPath};
    use clap::Parser;

    fn args(extra: &[&str]) -> Args {
        Args::try_parse_from([&["amber-bench"][..], extra].concat()).unwrap()
    }

    #[test]
    fn the_plan_follows_runs_and_caps_the_fresh_trees() {
        let p = Plan::of(&args(&[]));
        assert_eq!((p.firsts, p.edits, p.reads, p.files), (3, 20, 10, 10_000));
        let p = Plan::of(&args(&["--runs", "1", "--tree-files", "200"]));
        assert_eq!((p.firsts, p.edits, p.reads, p.files), (1, 1, 1, 200));
        assert_eq!(Plan::of(&args(&["--runs", "50"])).firsts, 3);
    }

    #[test]
    fn conversations_are_distinct_and_change_ten_files_each() {
        let a = args(&[
            "--runs",
            "12",
            "--tree-files",
            "100",
            "--only",
            "checkpoint",
        ]);
        let scenarios = Scenario::builtin().unwrap();
        let all = conversations(&a, &scenarios).unwrap();
        // warm-up, first, 12 edits, 12 reads.
        assert_eq!(all.len(), 2 + 12 + 12);
        for (i, c) in all.iter().enumerate() {
            for (j, d) in all.iter().enumerate() {
                assert!(
                    i == j || !d.prompt.contains(&c.prompt),
                    "{} in {}",
                    c.prompt,
                    d.prompt
                );
            }
            for s in &scenarios {
                assert!(!c.prompt.contains(&s.prompt) && !s.prompt.contains(&c.prompt));
            }
        }
        let edit = edit_command(1, 100, "edit 0");
        assert!(edit.contains("src/mod_000/file_00010.rs"), "{edit}");
        assert!(edit.contains("src/mod_000/file_00019.rs"), "{edit}");
        assert!(!edit.contains("file_00020"), "{edit}");
        // Block 10 of a 100-file tree wraps around to the first files.
        assert_eq!(block_files(10, 100)[0], "src/mod_000/file_00000.rs");
        assert_eq!(read_path(101, 100), "src/mod_000/file_00001.rs");
        assert!(
            conversations(&args(&["--only", "ready"]), &scenarios)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_scenario_prompt_overlapping_the_kpis_is_refused() {
        let mut scenarios = Scenario::builtin().unwrap();
        scenarios[0].prompt = format!("{PROMPT_PREFIX}edit 1]: hello");
        let err = conversations(&args(&[]), &scenarios)
            .unwrap_err()
            .to_string();
        assert!(err.contains("overlaps the checkpoint KPI"), "{err}");
    }

    #[test]
    fn a_turn_splits_at_its_call_and_counts_only_if_it_ran_as_scripted() {
        let sent = Instant::now();
        let at = |millis: u64| Some(sent + Duration::from_millis(millis));
        let mut seen = Seen {
            started: at(1),
            tool_started: at(41),
            tool_completed: at(45),
            completed: at(90),
            tools: vec![ToolStatus::Ok],
            stop: Some(StopReason::EndTurn),
            ..Seen::default()
        };
        assert_eq!(
            times(&seen, sent),
            Some(TurnTimes {
                total: 90.0,
                before: 40.0,
                after: 45.0
            })
        );
        seen.tools = vec![ToolStatus::Denied];
        assert_eq!(times(&seen, sent), None);
        seen.tools = vec![ToolStatus::Ok, ToolStatus::Ok];
        assert_eq!(times(&seen, sent), None);
        seen.tools = vec![ToolStatus::Ok];
        seen.stop = Some(StopReason::Error);
        assert_eq!(times(&seen, sent), None);
        seen.stop = Some(StopReason::EndTurn);
        seen.tool_started = None;
        assert_eq!(times(&seen, sent), None);
    }

    #[test]
    fn each_sample_gets_a_tree_of_its_own() {
        let dirs = [0, 1, 2].map(|_| tempfile::tempdir().unwrap());
        for (j, dir) in dirs.iter().enumerate() {
            tree::generate(dir.path(), 3, seed(j)).unwrap();
        }
        let text = |j: usize| std::fs::read(dirs[j].path().join(tree::rel_path(2))).unwrap();
        assert_ne!(text(0), text(1));
        assert_ne!(text(1), text(2));
        assert_ne!(text(0), text(2));
    }

    #[test]
    fn the_edit_command_appends_a_line_to_each_file() {
        let dir = tempfile::tempdir().unwrap();
        tree::generate(dir.path(), 20, 1).unwrap();
        let before = block_bytes(dir.path(), 1, 20).unwrap();
        let status = std::process::Command::new("bash")
            .arg("-c")
            .arg(edit_command(1, 20, "edit 0"))
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let line = "// amber-bench checkpoint: edit 0\n";
        assert_eq!(
            block_bytes(dir.path(), 1, 20).unwrap(),
            before + (FILES_PER_TURN * line.len()) as u64
        );
        let text = std::fs::read_to_string(dir.path().join(tree::rel_path(19))).unwrap();
        assert!(text.ends_with(line), "{text}");
        // Block 0 is untouched.
        let first = std::fs::read_to_string(dir.path().join(tree::rel_path(0))).unwrap();
        assert!(!first.contains("amber-bench checkpoint"));
    }

    #[test]
    fn store_growth_is_the_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let none = BTreeMap::new();
        assert!(
            store_files(&objects, &none).unwrap().is_empty(),
            "missing: empty"
        );
        std::fs::create_dir_all(objects.join("ab")).unwrap();
        std::fs::create_dir_all(objects.join("tmp")).unwrap();
        std::fs::write(objects.join("ab/cdef"), [0u8; 100]).unwrap();
        std::fs::write(objects.join("tmp/partial"), [0u8; 7]).unwrap();
        let before = store_files(&objects, &none).unwrap();
        assert_eq!(
            before.clone().into_iter().collect::<Vec<_>>(),
            [("ab/cdef".to_owned(), 100)]
        );
        std::fs::create_dir_all(objects.join("cd")).unwrap();
        std::fs::write(objects.join("cd/0123"), [0u8; 30]).unwrap();
        std::fs::write(objects.join("ab/9999"), [0u8; 5]).unwrap();
        let after = store_files(&objects, &before).unwrap();
        let new = added(&before, &after);
        // A known blob keeps its known size (no stat); a vanished one is gone.
        let mut stale = before.clone();
        stale.insert("ab/cdef".to_owned(), 1);
        stale.insert("ff/gone".to_owned(), 9);
        let relisted = store_files(&objects, &stale).unwrap();
        assert_eq!(relisted.get("ab/cdef"), Some(&1));
        assert!(!relisted.contains_key("ff/gone"));
        assert_eq!(new, [("ab/9999".to_owned(), 5), ("cd/0123".to_owned(), 30)]);
        let manifests: HashSet<String> = ["cd/0123".to_owned()].into();
        assert_eq!(
            Growth::of(&new, Some(&manifests)),
            Growth {
                bytes: 35,
                blobs: 2,
                manifests: Some(30)
            }
        );
        assert_eq!(Growth::of(&new, None).manifests, None);
        assert_eq!(Growth::of(&[], None), Growth::default());
    }

    #[test]
    fn snapshot_blobs_come_from_before_and_after_rows() {
        let a = "a".repeat(64);
        let b = format!("bb{}", "0".repeat(62));
        let rows = format!(
            "{{\"k\":\"turn\",\"turnId\":\"t1\",\"seq\":3}}\n\
             {{\"k\":\"before\",\"turnId\":\"t1\",\"snapshot\":\"{a}\"}}\n\
             {{\"k\":\"after\",\"turnId\":\"t1\",\"snapshot\":\"{b}\",\"changed\":[]}}\n\
             {{\"k\":\"before\",\"turnId\":\"t2\",\"snapshot\":null}}\n\
             torn line\n"
        );
        let set = snapshot_blobs(&rows);
        assert_eq!(set.len(), 2);
        assert!(set.contains(&format!("aa/{}", "a".repeat(62))), "{set:?}");
        assert!(set.contains(&format!("bb/{}", "0".repeat(62))), "{set:?}");
    }

    fn row(turn: u32, changed: usize) -> CheckpointInfo {
        CheckpointInfo {
            turn_id: format!("t{turn}"),
            seq: 1,
            time: String::new(),
            prompt: String::new(),
            changed: (0..changed)
                .map(|i| ChangedPath {
                    path: format!("f{i}"),
                    status: ChangeStatus::Modified,
                })
                .collect(),
            skipped: Vec::new(),
            turn,
            incomplete: None,
            checkpoint: None,
        }
    }

    #[test]
    fn rows_must_be_one_per_file_changing_turn_naming_its_files() {
        let good = vec![(vec![row(1, 10), row(2, 10)], 2), (vec![row(1, 10)], 1)];
        assert_eq!(check_rows(&good, 10), Ok(()));
        let missing = vec![(vec![row(1, 10)], 2)];
        let err = check_rows(&missing, 10).unwrap_err();
        assert!(err.contains("1 row(s) for 2"), "{err}");
        let none = vec![(Vec::new(), 1)];
        assert!(check_rows(&none, 10).is_err());
        let short = vec![(vec![row(1, 10), row(2, 3)], 2)];
        let err = check_rows(&short, 10).unwrap_err();
        assert!(err.contains("turn 2 lists 3"), "{err}");
    }

    fn turns(total: &[f64], before: &[f64], after: &[f64]) -> Turns {
        Turns {
            total: total.to_vec(),
            before: before.to_vec(),
            after: after.to_vec(),
        }
    }

    #[test]
    fn figures_are_differences_of_medians_and_the_growth_per_turn() {
        let m = Samples {
            tree_files: 10_000,
            tree_bytes: 35 * 1024 * 1024,
            first: [
                turns(
                    &[1600.0, 1500.0, 1700.0],
                    &[1450.0, 1400.0, 1500.0],
                    &[50.0; 3],
                ),
                turns(&[10.0, 12.0, 11.0], &[2.0; 3], &[3.0; 3]),
            ],
            edit: [
                turns(
                    &[80.0, 90.0, 70.0],
                    &[36.0, 40.0, 38.0],
                    &[37.0, 35.0, 36.0],
                ),
                turns(&[10.0, 11.0, 9.0], &[2.0; 3], &[3.0; 3]),
            ],
            read: [
                turns(&[5.0, 6.0], &[1.0; 2], &[1.0; 2]),
                turns(&[5.5, 5.5], &[1.0; 2], &[1.0; 2]),
            ],
            first_growth: vec![Growth {
                bytes: 8 * 1024 * 1024,
                blobs: 10_002,
                manifests: None,
            }],
            edit_growth: vec![
                Growth {
                    bytes: 2048,
                    blobs: 12,
                    manifests: Some(1024),
                },
                Growth {
                    bytes: 4096,
                    blobs: 12,
                    manifests: Some(3072),
                },
            ],
            read_growth: vec![Growth::default(), Growth::default()],
            changed: vec![4096, 4096],
            rows: 24,
            rows_expected: 24,
            ..Samples::default()
        };
        let mut r = Report::default();
        report(&mut r, &m);
        assert_eq!(r.get("checkpoint_first_ms_median"), Some(1589.0));
        assert_eq!(r.get("checkpoint_first_before_ms_median"), Some(1448.0));
        assert_eq!(r.get("checkpoint_first_store_mib_median"), Some(8.0));
        assert_eq!(r.get("checkpoint_first_runs_count"), Some(3.0));
        assert_eq!(r.get("checkpoint_edit_added_ms_median"), Some(70.0));
        assert_eq!(r.get("checkpoint_incremental_ms_median"), Some(35.0));
        assert_eq!(r.get("checkpoint_incremental_before_ms_median"), Some(36.0));
        assert_eq!(r.get("checkpoint_incremental_after_ms_median"), Some(33.0));
        assert_eq!(r.get("checkpoint_changed_kib_median"), Some(4.0));
        assert_eq!(r.get("checkpoint_growth_kib_median"), Some(3.0));
        assert_eq!(r.get("checkpoint_growth_manifest_kib_median"), Some(2.0));
        assert_eq!(r.get("checkpoint_growth_content_kib_median"), Some(1.0));
        assert_eq!(r.get("checkpoint_growth_ratio_median"), Some(0.75));
        assert_eq!(r.get("checkpoint_read_added_ms_median"), Some(0.0));
        assert_eq!(r.get("checkpoint_read_growth_kib_max"), Some(0.0));
        assert_eq!(r.get("checkpoint_rows_count"), Some(24.0));
        let text = r.human();
        assert!(
            text.contains("### checkpoints through amberd (10000-file tree"),
            "{text}"
        );
        // Nothing measured: no figure but the counts.
        let mut empty = Report::default();
        report(&mut empty, &Samples::default());
        assert_eq!(empty.get("checkpoint_incremental_ms_median"), None);
        assert_eq!(empty.get("checkpoint_growth_ratio_median"), None);
    }

    #[test]
    fn goals_are_judged_for_the_10k_tree_only() {
        let mut r = Report::default();
        r.put("checkpoint_first_ms_median", "first", 1500.0);
        r.put("checkpoint_incremental_ms_median", "incremental", 60.0);
        r.put("checkpoint_growth_ratio_median", "growth", 0.4);
        r.put("checkpoint_read_growth_kib_max", "read", 0.0);
        crate::kpi::checkpoint_goals(&mut r, &args(&[]));
        let text = r.human();
        assert!(
            text.contains("| checkpoint_first_ms_median = 1500 | met |"),
            "{text}"
        );
        assert!(
            text.contains("| checkpoint_incremental_ms_median = 60 | NOT met |"),
            "{text}"
        );
        assert!(
            text.contains("| checkpoint_growth_ratio_median = 0.400 | met |"),
            "{text}"
        );
        assert!(
            text.contains("| checkpoint_read_growth_kib_max = 0 | met |"),
            "{text}"
        );
        let mut small = Report::default();
        small.put("checkpoint_first_ms_median", "first", 1500.0);
        small.put("checkpoint_read_growth_kib_max", "read", 1.0);
        crate::kpi::checkpoint_goals(&mut small, &args(&["--tree-files", "200"]));
        let text = small.human();
        assert!(
            text.contains("| not judged (--tree-files 200: stated for 10000) |"),
            "{text}"
        );
        assert!(
            text.contains("| checkpoint_read_growth_kib_max = 1 | NOT met |"),
            "{text}"
        );
    }
}
