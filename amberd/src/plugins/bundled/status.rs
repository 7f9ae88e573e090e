//! The `status` plugin: status-line segments (model, mode, OS sandbox, state, context use,
//! tokens, cost, git branch, running processes), rendered per session by the daemon.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use amber_proto::{SandboxMode, SessionState};

use crate::plugins::{Contributions, SessionView, StatusSegment, View};
use amber_tools::sandbox::ToolSandbox;

type Render = fn(&View<'_>, &dyn SessionView) -> Option<String>;

struct Segment {
    name: &'static str,
    render: Render,
}

impl StatusSegment for Segment {
    fn name(&self) -> &str {
        self.name
    }

    fn render(&self, view: View<'_>) -> Option<String> {
        let session = view.session?;
        (self.render)(&view, session)
    }
}

pub(super) fn install(c: &mut Contributions) {
    let segments: [(&'static str, Render); 10] = [
        ("model", |_, s| {
            let info = s.info();
            Some(match info.provider {
                Some(p) => format!("{}@{p}", info.model),
                None => info.model,
            })
        }),
        ("mode", |_, s| {
            serde_json::to_value(s.mode())
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
        }),
        ("sandbox", |_, s| Some(sandbox_text(&s.tools().sandbox()))),
        ("state", |_, s| {
            Some(
                match s.state() {
                    SessionState::Idle => "idle",
                    SessionState::Running => "running",
                    SessionState::WaitingApproval => "waiting for approval",
                }
                .to_owned(),
            )
        }),
        ("context", |v, s| {
            let used = v.host.context_tokens(s);
            let window = v.host.context_window(s).max(1);
            Some(format!("ctx {}%", used.saturating_mul(100) / window))
        }),
        ("tokens", |_, s| {
            let usage = s.info().usage;
            Some(format!(
                "{} tok",
                compact_number(
                    usage
                        .total_tokens
                        .max(usage.prompt_tokens.saturating_add(usage.completion_tokens))
                )
            ))
        }),
        // Only for a model with a known price: an unknown cost is no cost to show.
        ("cost", |_, s| {
            s.info().usage.cost_usd.map(|c| c.to_string())
        }),
        // The daemon-wide cap nearest its end (`[budget]`), when there is one.
        ("budget", |v, _| budget_text(&v.host.budget_use())),
        ("git", |_, s| {
            git_branch(s.workspace()).map(|b| format!("⎇ {b}"))
        }),
        ("processes", |_, s| {
            let running = s.tools().processes_running();
            (running > 0).then(|| format!("{running} proc"))
        }),
    ];
    for (name, render) in segments {
        c.status(Arc::new(Segment { name, render }));
    }
}

/// `sandbox: workspace-write`, `sandbox: read-only +net`, `sandbox: workspace-write
/// +allowlist`, `sandbox: off`, and `(unavailable)` when the kernel cannot give the sandbox
/// (commands then ask first).
fn sandbox_text(sandbox: &ToolSandbox) -> String {
    let info = sandbox.info();
    let net = match info.network_mode {
        _ if info.mode == SandboxMode::Off => "",
        amber_proto::NetworkMode::On => " +net",
        amber_proto::NetworkMode::Allowlist => " +allowlist",
        amber_proto::NetworkMode::Off => "",
    };
    let unavailable = match sandbox {
        ToolSandbox::Unavailable { .. } => " (unavailable)",
        _ => "",
    };
    format!("sandbox: {}{net}{unavailable}", info.mode)
}

/// `budget $16.52/$20.00 today`: the cap with the most of it spent.
fn budget_text(uses: &[amber_proto::BudgetUse]) -> Option<String> {
    let tightest = uses.iter().max_by(|a, b| {
        let share = |u: &amber_proto::BudgetUse| u.spent_usd.usd() / u.cap_usd.usd().max(1e-9);
        share(a).total_cmp(&share(b))
    })?;
    let when = match tightest.scope {
        amber_proto::LimitScope::Monthly => "this month".to_owned(),
        amber_proto::LimitScope::Daily => "today".to_owned(),
        scope => format!(
            "{} ({})",
            scope.named(tightest.key.as_deref()),
            tightest.period
        ),
    };
    Some(format!(
        "budget ${:.2}/${:.2} {when}",
        tightest.spent_usd.usd(),
        tightest.cap_usd.usd()
    ))
}

/// 950, 1.2k, 34k, 1.5M.
fn compact_number(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..10_000 => format!("{:.1}k", n as f64 / 1_000.0),
        10_000..1_000_000 => format!("{}k", n / 1_000),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// The checked-out branch of the repository containing `dir` (short commit when
/// detached). Reads `.git/HEAD` directly: no process per status refresh.
pub(super) fn git_branch(dir: &Path) -> Option<String> {
    let git = dir
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.exists())?;
    let git_dir: PathBuf = if git.is_file() {
        // A worktree or submodule: `.git` is a file saying `gitdir: PATH`.
        let text = std::fs::read_to_string(&git).ok()?;
        let target = text.strip_prefix("gitdir:")?.trim();
        let target = Path::new(target);
        if target.is_absolute() {
            target.to_owned()
        } else {
            git.parent()?.join(target)
        }
    } else {
        git
    };
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref:") {
        Some(r) => Some(r.trim().trim_start_matches("refs/heads/").to_owned()),
        None => Some(head.chars().take(7).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_segment_shows_the_cap_nearest_its_end() {
        use amber_proto::{BudgetUse, CostUsd, LimitScope};
        let usd = |v| CostUsd::from_usd(v).unwrap();
        let cap = |scope, key: Option<&str>, spent, cap| BudgetUse {
            scope,
            key: key.map(str::to_owned),
            period: "2026-12-07".into(),
            spent_usd: usd(spent),
            cap_usd: usd(cap),
        };
        assert_eq!(budget_text(&[]), None);
        let uses = [
            cap(LimitScope::Daily, None, 5.0, 20.0),
            cap(LimitScope::Monthly, None, 150.0, 300.0),
        ];
        assert_eq!(
            budget_text(&uses).as_deref(),
            Some("budget $150.00/$300.00 this month")
        );
        let uses = [
            cap(LimitScope::Daily, None, 5.0, 20.0),
            cap(LimitScope::Model, Some("big"), 9.0, 10.0),
        ];
        assert_eq!(
            budget_text(&uses).as_deref(),
            Some("budget $9.00/$10.00 model big (2026-12-07)")
        );
    }

    #[test]
    fn the_sandbox_segment_names_the_mode_the_network_and_an_unavailable_kernel() {
        use amber_exec::sandbox::{SandboxInfo, SandboxSpec};
        let spec = |mode, network| {
            ToolSandbox::On(Arc::new(SandboxSpec {
                egress: None,
                mode,
                network,
                workspace: "/ws".into(),
                tmp_dir: "/t".into(),
                writable_roots: vec![],
                hidden: vec![],
                masked: vec![],
                allow_unix_sockets: vec![],
                nested_checkouts: vec![],
                daemon_pid: None,
                guarded_pids: Vec::new(),
                simulate_landlock_abi: None,
                in_place: false,
            }))
        };
        assert_eq!(
            sandbox_text(&spec(SandboxMode::WorkspaceWrite, false)),
            "sandbox: workspace-write"
        );
        assert_eq!(
            sandbox_text(&spec(SandboxMode::ReadOnly, true)),
            "sandbox: read-only +net"
        );
        let allowlist = ToolSandbox::On(Arc::new(SandboxSpec {
            egress: Some(amber_exec::sandbox::EgressSpec { port: 3128 }),
            ..match spec(SandboxMode::WorkspaceWrite, false) {
                ToolSandbox::On(spec) => (*spec).clone(),
                _ => unreachable!(),
            }
        }));
        assert_eq!(
            sandbox_text(&allowlist),
            "sandbox: workspace-write +allowlist"
        );
        assert_eq!(sandbox_text(&ToolSandbox::Off), "sandbox: off");
        let unavailable = ToolSandbox::Unavailable {
            info: SandboxInfo::default(),
            reason: "no Landlock".into(),
        };
        assert_eq!(
            sandbox_text(&unavailable),
            "sandbox: workspace-write (unavailable)"
        );
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(compact_number(950), "950");
        assert_eq!(compact_number(1_234), "1.2k");
        assert_eq!(compact_number(34_567), "34k");
        assert_eq!(compact_number(1_500_000), "1.5M");
    }

    #[test]
    fn branch_from_head_file_worktree_and_detached() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        assert_eq!(
            git_branch(&root.join("src/deep")).as_deref(),
            Some("feature/x")
        );

        let wt = root.join("wt");
        std::fs::create_dir_all(root.join(".git/worktrees/wt")).unwrap();
        std::fs::write(root.join(".git/worktrees/wt/HEAD"), "0123456789abcdef\n").unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), "gitdir: ../.git/worktrees/wt\n").unwrap();
        assert_eq!(git_branch(&wt).as_deref(), Some("0123456"));

        let none = tempfile::tempdir().unwrap();
        // A temp dir normally has no repository above it.
        if !none.path().ancestors().any(|a| a.join(".git").exists()) {
            assert_eq!(git_branch(none.path()), None);
        }
    }
}
