//! What `[[hooks]]` cost per tool call: the `sandbox` scenario (role `sandbox`:
//! 20 sequential `bash true N` calls) through three daemons of this KPI's own that differ
//! only in their `config.toml` hooks:
//!
//! - **none**: no hooks;
//! - **true**: a `pre_tool_use` and a `post_tool_use` hook, both `["/bin/true"]` (exit 0, no
//!   output: no decision);
//! - **allow**: a `pre_tool_use` hook answering `{"decision":"allow"}` through `/bin/sh -c
//!   'echo …'`, and the same `post_tool_use` `/bin/true`.
//!
//! Every session has the default OS sandbox (workspace-write), which hooks run in like
//! `bash`, so the three compare like with like. The runs alternate between the daemons
//! (rotating the order). Per call: the client's `tool_call_started` → `tool_call_completed`
//! wall (the `pre_tool_use` hook runs between the two: amberd publishes the start before the
//! gate) and the tool's `durationMs`; per task: prompt → `turn_completed` (which also pays
//! for the `post_tool_use` hooks amberd spawns in the background). Added cost = variant −
//! none, at the median and at p99.

use amber_client::Client;
use amber_proto::{SandboxMode, SessionNewParams, ToolStatus};

use crate::daemon::{DaemonProc, DaemonSpec};
use crate::error::BenchError;
use crate::report::Report;
use crate::scenario::Role;
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;

/// Tasks per variant (20 calls each).
const RUNS: usize = 10;
/// The trivial hook program: exit 0, no output.
const TRUE_PROGRAM: &str = "/bin/true";
/// The shell the answering hook runs.
const SHELL: &str = "/bin/sh";
/// What the answering hook prints.
const ALLOW_ANSWER: &str = r#"{"decision":"allow"}"#;

/// One daemon configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    None,
    True,
    Allow,
}

const VARIANTS: [Variant; 3] = [Variant::None, Variant::True, Variant::Allow];

impl Variant {
    /// The key part and the label of the variant's figures.
    fn key(self) -> &'static str {
        match self {
            Variant::None => "hooks_bash_none",
            Variant::True => "hooks_bash_true",
            Variant::Allow => "hooks_bash_allow",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Variant::None => "no hooks",
            Variant::True => "pre + post hook `/bin/true`",
            Variant::Allow => "pre hook `sh -c 'echo {\"decision\":\"allow\"}'` + post `/bin/true`",
        }
    }

    /// The `[[hooks]]` entries of the variant's `config.toml`.
    fn config(self) -> String {
        let truth = [TRUE_PROGRAM.to_owned()];
        let allow = [
            SHELL.to_owned(),
            "-c".to_owned(),
            format!("echo '{ALLOW_ANSWER}'"),
        ];
        match self {
            Variant::None => String::new(),
            Variant::True => hooks_toml(&[("pre_tool_use", &truth), ("post_tool_use", &truth)]),
            Variant::Allow => hooks_toml(&[("pre_tool_use", &allow), ("post_tool_use", &truth)]),
        }
    }
}

/// `[[hooks]]` tables for `(event, argv)` pairs. The argv is written as a JSON array of
/// strings, which is also a valid TOML array of basic strings.
fn hooks_toml(hooks: &[(&str, &[String])]) -> String {
    let mut text = String::new();
    for (event, argv) in hooks {
        let command = serde_json::to_string(argv).unwrap_or_else(|_| "[]".to_owned());
        text.push_str(&format!(
            "\n[[hooks]]\nevent = \"{event}\"\ncommand = {command}\n"
        ));
    }
    text
}

/// Per-call and per-task figures of one variant.
#[derive(Debug, Default)]
struct Samples {
    /// `tool_call_started` → `tool_call_completed` at the client, calls that ended `ok`.
    wall: Vec<f64>,
    /// `durationMs` of the calls that ended `ok`.
    duration: Vec<f64>,
    /// Prompt → `turn_completed`, tasks that ended with `end_turn`.
    task: Vec<f64>,
    calls: usize,
    failures: usize,
    first_failure: Option<String>,
}

impl Samples {
    fn add(&mut self, total: f64, seen: &task::Observed) {
        for (status, d) in &seen.tools {
            if *status == ToolStatus::Ok {
                self.calls += 1;
                self.duration.push(*d as f64);
            } else {
                self.failures += 1;
            }
        }
        for (status, wall) in &seen.tool_walls {
            if *status == ToolStatus::Ok {
                self.wall.push(ms(*wall));
            }
        }
        if self.first_failure.is_none() {
            self.first_failure.clone_from(&seen.first_tool_failure);
        }
        if seen.ok() {
            self.task.push(total);
        } else {
            self.failures += 1;
            self.first_failure.get_or_insert(seen.outcome());
        }
    }
}

/// One daemon of the three.
struct Side {
    _daemon: DaemonProc,
    client: Client,
}

/// The three daemons, the alternating runs, the report.
pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let scenario =
        s.of_role(Role::Sandbox).into_iter().next().ok_or_else(|| {
            BenchError::Usage("no sandbox scenario (the hooks KPI runs it)".into())
        })?;
    let runs = s.args.runs(RUNS);
    let mut sides = Vec::with_capacity(VARIANTS.len());
    for v in VARIANTS {
        let spec = DaemonSpec {
            extra_config: v.config(),
            ..s.spec.clone()
        };
        let daemon = DaemonProc::start(&spec, "hooks").await?;
        let client = Client::connect(task::connect_options(&daemon.socket)).await?;
        sides.push(Side {
            _daemon: daemon,
            client,
        });
    }
    let mut m: [Samples; 3] = Default::default();
    let mut modes = Vec::new();
    let (mut tools_ok, mut tools_total) = (0, 0);
    for i in 0..runs {
        for k in 0..VARIANTS.len() {
            let v = (i + k) % VARIANTS.len();
            let cwd = task::workspace(
                &scenario,
                s.scratch.path(),
                None,
                &format!("hooks-{}-{i}", VARIANTS[v].key()),
            )?;
            let params = SessionNewParams {
                cwd,
                ..SessionNewParams::default()
            };
            let (run, info) = task::run_with(&sides[v].client, &[], &scenario, &params).await?;
            modes.push(info.sandbox.map(|i| i.mode));
            let Some(seen) = run.observed.first() else {
                continue;
            };
            tools_total += seen.tools.len();
            tools_ok += seen.tools_ok();
            m[v].add(ms(run.total), seen);
        }
    }
    s.count_tools(tools_ok, tools_total);
    let odd: Vec<_> = modes
        .iter()
        .filter(|m| **m != Some(SandboxMode::WorkspaceWrite))
        .collect();
    if let Some(first) = odd.first() {
        s.report.note(format!(
            "hooks: {} session(s) had another sandbox than the default (workspace-write): {first:?}; hooks ran outside it there",
            odd.len()
        ));
    }
    report(&mut s.report, &scenario.name, &m);
    Ok(())
}

fn report(r: &mut Report, name: &str, m: &[Samples; 3]) {
    r.section(&format!(
        "Hooks through amberd ({name}: `bash true` calls, default sandbox; no hooks vs pre + post hooks)"
    ));
    for (v, samples) in VARIANTS.iter().zip(m) {
        let (key, label) = (v.key(), v.label());
        if let Some(w) = Summary::of(&samples.wall) {
            r.put_summary(
                &format!("{key}_wall_ms"),
                &format!(
                    "`bash true`, {label}: tool_call_started → tool_call_completed at the client"
                ),
                &w,
            );
        }
        if let Some(d) = Summary::of(&samples.duration) {
            r.put_median(
                &format!("{key}_ms"),
                &format!("`bash true`, {label}: tool durationMs"),
                &d,
            );
        }
        if let Some(t) = Summary::of(&samples.task) {
            r.put_summary(
                &format!("{key}_task_ms"),
                &format!("{name} task, {label}: prompt → turn_completed"),
                &t,
            );
        }
    }
    let [none, ..] = m;
    let base = Summary::of(&none.wall);
    let base_task = Summary::of(&none.task);
    for (v, samples) in VARIANTS.iter().zip(m).skip(1) {
        let label = v.label();
        let added = v.key().replacen("hooks_bash_", "hooks_added_", 1);
        if let (Some(a), Some(b)) = (&base, Summary::of(&samples.wall)) {
            r.put(
                &format!("{added}_wall_ms_median"),
                &format!("added per `bash` call by {label} (wall − no hooks), median"),
                b.median - a.median,
            );
            r.put(
                &format!("{added}_wall_ms_p99"),
                &format!("added per `bash` call by {label} (wall − no hooks), p99"),
                b.p99 - a.p99,
            );
        }
        if let (Some(a), Some(b)) = (&base_task, Summary::of(&samples.task)) {
            r.put(
                &format!("{added}_task_ms_median"),
                &format!("added per task by {label} (task − no hooks), median"),
                b.median - a.median,
            );
        }
    }
    r.put(
        "hooks_bash_calls_count",
        "`bash` calls that ended ok (all three variants)",
        m.iter().map(|s| s.calls).sum::<usize>() as f64,
    );
    r.put(
        "hooks_bash_failures_count",
        "`bash` calls or tasks that did not end ok (all three variants)",
        m.iter().map(|s| s.failures).sum::<usize>() as f64,
    );
    for (v, samples) in VARIANTS.iter().zip(m) {
        if let Some(f) = &samples.first_failure {
            r.note(format!(
                "hooks ({}): first failure: {}",
                v.label(),
                f.trim()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_writes_its_hooks_as_valid_toml() {
        assert_eq!(Variant::None.config(), "");
        let parse = |v: Variant| -> toml::Value {
            toml::from_str(&format!("[agent]\nconfirm_finish = false\n{}", v.config())).unwrap()
        };
        let truth = parse(Variant::True);
        assert_eq!(
            truth["hooks"],
            toml::Value::try_from(serde_json::json!([
                {"event": "pre_tool_use", "command": ["/bin/true"]},
                {"event": "post_tool_use", "command": ["/bin/true"]},
            ]))
            .unwrap()
        );
        let allow = parse(Variant::Allow);
        assert_eq!(allow["hooks"][0]["event"].as_str(), Some("pre_tool_use"));
        assert_eq!(
            allow["hooks"][0]["command"][2].as_str(),
            Some(r#"echo '{"decision":"allow"}'"#)
        );
        assert_eq!(allow["hooks"][1]["command"][0].as_str(), Some("/bin/true"));
    }

    #[test]
    fn figures_per_variant_and_the_added_cost() {
        let none = Samples {
            wall: vec![3.0, 4.0, 3.5],
            duration: vec![3.0, 3.0, 3.0],
            task: vec![100.0],
            calls: 3,
            ..Samples::default()
        };
        let truth = Samples {
            wall: vec![6.0, 7.0, 6.5],
            duration: vec![3.0, 3.0, 3.0],
            task: vec![180.0],
            calls: 3,
            ..Samples::default()
        };
        let allow = Samples {
            wall: vec![8.0, 9.0],
            duration: vec![3.0, 3.0],
            task: vec![],
            calls: 2,
            failures: 2,
            first_failure: Some("stop Error: x\n".into()),
        };
        let mut r = Report::default();
        report(&mut r, "sandbox", &[none, truth, allow]);
        assert_eq!(r.get("hooks_bash_none_wall_ms_median"), Some(3.5));
        assert_eq!(r.get("hooks_bash_true_wall_ms_p99"), Some(7.0));
        assert_eq!(r.get("hooks_bash_none_ms_median"), Some(3.0));
        assert_eq!(r.get("hooks_bash_true_task_ms_median"), Some(180.0));
        assert_eq!(r.get("hooks_added_true_wall_ms_median"), Some(3.0));
        assert_eq!(r.get("hooks_added_true_wall_ms_p99"), Some(3.0));
        assert_eq!(r.get("hooks_added_true_task_ms_median"), Some(80.0));
        assert_eq!(r.get("hooks_added_allow_wall_ms_p99"), Some(5.0));
        assert_eq!(r.get("hooks_added_allow_task_ms_median"), None);
        assert_eq!(r.get("hooks_bash_calls_count"), Some(8.0));
        assert_eq!(r.get("hooks_bash_failures_count"), Some(2.0));
        assert!(
            r.notes()
                .iter()
                .any(|n| n.ends_with("first failure: stop Error: x")),
            "{:?}",
            r.notes()
        );
        assert!(r.human().contains("### Hooks through amberd"));
    }
}
