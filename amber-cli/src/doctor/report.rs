//! What `doctor` found, as one value: its JSON shape (`--json`), its human text, and the
//! verdict the exit code follows. Pure: no I/O.

use amber_proto::{ProviderStatus, SandboxSelftestResult, SandboxStatus};
use serde::Serialize;

use super::reach::Reach;
use crate::daemon::uptime;

/// Everything `doctor` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Report {
    /// The sandbox is available and every self-test check passed.
    pub ok: bool,
    pub client: Peer,
    pub daemon: DaemonPart,
    /// `None`: the daemon does not report one (an older amberd).
    pub provider: Option<ProviderPart>,
    /// `None`: the daemon does not report one (an older amberd).
    pub sandbox: Option<SandboxStatus>,
    pub selftest: SelftestPart,
    /// Why `ok` is false, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// What is worth knowing but does not fail the check (the provider, untrusted
    /// workspace configuration).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What the workspace would load, and what of it is untrusted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspacePart>,
}

/// The workspace's configuration files, as `trust/list` reports them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkspacePart {
    pub cwd: String,
    pub files: Vec<amber_proto::TrustFile>,
    /// Why it could not be listed (not a directory amber takes as a workspace …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl WorkspacePart {
    pub(super) fn error(cwd: Option<&std::path::Path>, error: String) -> WorkspacePart {
        WorkspacePart {
            cwd: cwd
                .map(|c| c.display().to_string())
                .unwrap_or_else(|| ".".to_owned()),
            files: Vec::new(),
            error: Some(error),
        }
    }
}

/// A warning per untrusted workspace configuration file.
pub(super) fn workspace_warnings(w: &WorkspacePart) -> Vec<String> {
    w.files
        .iter()
        .filter(|f| f.state == amber_proto::TrustState::Untrusted)
        .map(|f| {
            format!(
                "{} is untrusted: it is ignored (a rules file's deny and ask rules still apply) \
                 until you review it and run `amber-cli trust {}`",
                f.path, f.path
            )
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Peer {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DaemonPart {
    pub name: String,
    pub version: String,
    pub pid: u32,
    pub uptime_ms: u64,
    pub socket: String,
}

/// `daemon/status.provider` and what the GET of its `/models` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ProviderPart {
    #[serde(flatten)]
    pub status: ProviderStatus,
    /// The URL probed; absent without a base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether any HTTP answer came back; absent without a base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reachable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ProviderPart {
    pub(super) fn new(status: ProviderStatus, url: Option<String>, reach: Option<Reach>) -> Self {
        let (reachable, http_status, error) = match reach {
            Some(Reach::Answered(code)) => (Some(true), Some(code), None),
            Some(Reach::Failed(why)) => (Some(false), None, Some(why)),
            None => (None, None, None),
        };
        ProviderPart {
            status,
            url,
            reachable,
            http_status,
            error,
        }
    }
}

/// `sandbox/selftest`'s result, or why it could not be had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SelftestPart {
    #[serde(flatten)]
    pub result: SandboxSelftestResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SelftestPart {
    pub(super) fn from_call(result: Result<SandboxSelftestResult, String>) -> Self {
        match result {
            Ok(result) => SelftestPart {
                result,
                error: None,
            },
            Err(error) => SelftestPart {
                result: SandboxSelftestResult::default(),
                error: Some(error),
            },
        }
    }
}

/// The problems that fail the check: an unavailable (or unreported) sandbox, a self-test
/// that failed or could not run.
pub(super) fn problems(sandbox: Option<&SandboxStatus>, selftest: &SelftestPart) -> Vec<String> {
    let mut out = Vec::new();
    match sandbox {
        None => out.push(
            "amberd does not report its OS sandbox (an amberd older than this amber-cli?)"
                .to_owned(),
        ),
        Some(s) => match s.available {
            Some(true) => {}
            Some(false) => out.push(format!(
                "the OS sandbox is unavailable: {}",
                s.reason.as_deref().unwrap_or("no reason given")
            )),
            None => out.push("amberd is still probing the OS sandbox".to_owned()),
        },
    }
    if let Some(error) = &selftest.error {
        out.push(format!("the sandbox self-test could not run: {error}"));
    } else if !selftest.result.ok || selftest.result.checks.iter().any(|c| !c.ok) {
        let failed: Vec<&str> = selftest
            .result
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect();
        out.push(if failed.is_empty() {
            "the sandbox self-test failed".to_owned()
        } else {
            format!("the sandbox self-test failed: {}", failed.join(", "))
        });
    }
    out
}

/// Findings worth a warning that do not fail the check: the provider's (amber works
/// offline until a prompt needs the model), and each Landlock feature an older kernel ABI
/// lacks (the sandbox's other layers still hold; the warning says how far).
pub(super) fn warnings(
    provider: Option<&ProviderPart>,
    sandbox: Option<&SandboxStatus>,
) -> Vec<String> {
    let mut out = provider_warnings(provider);
    if let Some(s) = sandbox {
        for gap in &s.landlock_missing {
            out.push(format!(
                "Landlock ABI {} lacks {} (ABI {}): {}",
                s.landlock_abi.unwrap_or(0),
                gap.feature,
                gap.abi,
                gap.fallback
            ));
        }
    }
    out
}

fn provider_warnings(provider: Option<&ProviderPart>) -> Vec<String> {
    let Some(p) = provider else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if p.status.base_url.is_none() {
        out.push(
            "no LLM endpoint is configured (set [provider] base_url or AMBER_BASE_URL, or a key such as OPENAI_API_KEY)"
                .to_owned(),
        );
    }
    if let (Some(url), Some(error)) = (&p.url, &p.error) {
        out.push(format!("the provider did not answer at {url}: {error}"));
    }
    out
}

/// The human text.
pub(super) fn text(r: &Report) -> String {
    let mut lines = vec![
        row(&r.client.name, &r.client.version),
        row(
            &r.daemon.name,
            &format!(
                "{} · pid {} · up {}",
                r.daemon.version,
                r.daemon.pid,
                uptime(r.daemon.uptime_ms)
            ),
        ),
        row("socket", &r.daemon.socket),
    ];
    match &r.provider {
        None => lines.push(row("provider", "not reported by amberd")),
        Some(p) => {
            let key = if p.status.key_set {
                "API key set"
            } else {
                "no API key"
            };
            let base = p.status.base_url.as_deref().unwrap_or("(not configured)");
            lines.push(row(
                "provider",
                &format!("{base} · model {} · {key}", p.status.model),
            ));
            let reach = match (&p.url, p.http_status, &p.error) {
                (Some(url), Some(code), _) => format!("yes (GET {url} → HTTP {code})"),
                (Some(url), None, Some(error)) => format!("NO (GET {url}: {error})"),
                _ => "not checked (no base URL)".to_owned(),
            };
            lines.push(row("reachable", &reach));
        }
    }
    match &r.sandbox {
        None => lines.push(row("sandbox", "not reported by amberd")),
        Some(s) => {
            let verdict = match s.available {
                Some(true) => "available".to_owned(),
                Some(false) => format!(
                    "UNAVAILABLE: {}",
                    s.reason.as_deref().unwrap_or("no reason given")
                ),
                None => "still probing".to_owned(),
            };
            let network = if s.network { "on" } else { "off" };
            lines.push(row(
                "sandbox",
                &format!("{verdict} · default {}, network {network}", s.default_mode),
            ));
            let landlock = match (s.landlock_abi, s.landlock_enforcement) {
                (None, _) => "not available".to_owned(),
                (Some(abi), None) => format!("ABI {abi}"),
                (Some(abi), Some(level)) if s.landlock_missing.is_empty() => {
                    format!("ABI {abi} · {} enforcement", level.as_str())
                }
                (Some(abi), Some(level)) => {
                    let missing: Vec<&str> = s
                        .landlock_missing
                        .iter()
                        .map(|g| g.feature.as_str())
                        .collect();
                    format!(
                        "ABI {abi} · {} enforcement (missing: {})",
                        level.as_str(),
                        missing.join(", ")
                    )
                }
            };
            lines.push(row("landlock", &landlock));
            lines.push(row("seccomp", yes_no(Some(s.seccomp))));
            lines.push(row("namespaces", yes_no(s.namespaces)));
        }
    }
    match &r.selftest.error {
        Some(error) => lines.push(row("self-test", &format!("could not run: {error}"))),
        None => {
            let verdict = if r.selftest.result.ok { "ok" } else { "FAILED" };
            lines.push(row("self-test", verdict));
            let width = r
                .selftest
                .result
                .checks
                .iter()
                .map(|c| c.name.len())
                .max()
                .unwrap_or(0);
            for c in &r.selftest.result.checks {
                let mark = if c.ok { "ok  " } else { "FAIL" };
                lines.push(format!("  {mark} {:width$}  {}", c.name, c.detail));
            }
        }
    }
    if let Some(w) = &r.workspace {
        lines.push(row("workspace", &w.cwd));
        match &w.error {
            Some(error) => lines.push(format!("  not listed: {error}")),
            None if w.files.is_empty() => {
                lines
                    .push("  no configuration (.amber/rules.toml, hooks.toml, agents/)".to_owned());
            }
            None => {
                for f in &w.files {
                    lines.push(format!(
                        "  {:<9} {} ({})",
                        f.state.as_str(),
                        f.path,
                        f.kind.as_str()
                    ));
                    for effect in &f.effects {
                        lines.push(format!("      {effect}"));
                    }
                    if let Some(error) = &f.error {
                        lines.push(format!("      {error}"));
                    }
                }
            }
        }
    }
    for w in &r.warnings {
        lines.push(format!("warning: {w}"));
    }
    lines.join("\n")
}

fn row(label: &str, value: &str) -> String {
    format!("{label:<12} {value}")
}

fn yes_no(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::{SandboxMode, SelftestCheck};

    fn sandbox(available: Option<bool>, reason: Option<&str>) -> SandboxStatus {
        SandboxStatus {
            available,
            reason: reason.map(str::to_owned),
            landlock_abi: Some(7),
            landlock_enforcement: Some(amber_proto::LandlockEnforcement::Full),
            landlock_missing: Vec::new(),
            seccomp: true,
            namespaces: Some(true),
            default_mode: SandboxMode::WorkspaceWrite,
            network: false,
        }
    }

    fn selftest(oks: &[bool]) -> SelftestPart {
        let checks: Vec<SelftestCheck> = oks
            .iter()
            .enumerate()
            .map(|(i, ok)| SelftestCheck {
                name: format!("check_{i}"),
                ok: *ok,
                detail: format!("detail {i}"),
            })
            .collect();
        SelftestPart::from_call(Ok(SandboxSelftestResult {
            ok: oks.iter().all(|o| *o),
            checks,
        }))
    }

    fn report(sandbox: Option<SandboxStatus>, selftest: SelftestPart) -> Report {
        let provider = Some(ProviderPart::new(
            ProviderStatus {
                base_url: Some("http://127.0.0.1:8080/v1".into()),
                model: "qwen3".into(),
                key_set: true,
                flavor: None,
            },
            Some("http://127.0.0.1:8080/v1/models".into()),
            Some(Reach::Answered(200)),
        ));
        let problems = problems(sandbox.as_ref(), &selftest);
        Report {
            ok: problems.is_empty(),
            client: Peer {
                name: "amber-cli".into(),
                version: "0.1.0".into(),
            },
            daemon: DaemonPart {
                name: "amberd".into(),
                version: "0.1.0".into(),
                pid: 42,
                uptime_ms: 65_000,
                socket: "/run/amber/amberd.sock".into(),
            },
            warnings: warnings(provider.as_ref(), sandbox.as_ref()),
            workspace: None,
            provider,
            sandbox,
            selftest,
            problems,
        }
    }

    #[test]
    fn an_available_sandbox_with_every_check_passing_is_ok() {
        let r = report(
            Some(sandbox(Some(true), None)),
            selftest(&[true, true, true]),
        );
        assert!(r.ok, "{:?}", r.problems);
        let text = text(&r);
        assert!(
            text.contains("amberd       0.1.0 · pid 42 · up 1m 05s"),
            "{text}"
        );
        assert!(
            text.contains("yes (GET http://127.0.0.1:8080/v1/models → HTTP 200)"),
            "{text}"
        );
        assert!(text.contains("API key set"), "{text}");
        assert!(
            text.contains("landlock     ABI 7 · full enforcement"),
            "{text}"
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert!(text.contains("  ok   check_0  detail 0"), "{text}");
    }

    #[test]
    fn an_unavailable_sandbox_or_a_failed_check_is_not_ok() {
        let down = report(
            Some(sandbox(
                Some(false),
                Some("Landlock is not available in this kernel"),
            )),
            selftest(&[false, false, false]),
        );
        assert!(!down.ok);
        assert!(
            down.problems[0].contains("Landlock is not available"),
            "{:?}",
            down.problems
        );
        assert!(text(&down).contains("UNAVAILABLE: Landlock"));

        let leak = report(
            Some(sandbox(Some(true), None)),
            selftest(&[true, false, true]),
        );
        assert_eq!(leak.problems, ["the sandbox self-test failed: check_1"]);
        assert!(text(&leak).contains("  FAIL check_1  detail 1"));

        let probing = report(Some(sandbox(None, None)), selftest(&[true, true, true]));
        assert!(!probing.ok);
        let old = report(
            None,
            SelftestPart::from_call(Err("method not found".into())),
        );
        assert_eq!(old.problems.len(), 2, "{:?}", old.problems);
    }

    #[test]
    fn the_json_carries_the_findings_and_never_a_key() {
        let r = report(Some(sandbox(Some(true), None)), selftest(&[true]));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["provider"]["reachable"], true);
        assert_eq!(json["provider"]["httpStatus"], 200);
        assert_eq!(json["provider"]["keySet"], true);
        assert_eq!(json["sandbox"]["available"], true);
        assert_eq!(json["selftest"]["checks"][0]["ok"], true);
        assert_eq!(json["daemon"]["uptimeMs"], 65_000);
        assert!(json.get("problems").is_none());
    }

    #[test]
    fn a_partial_landlock_is_shown_and_warned_about_but_passes() {
        let mut older = sandbox(Some(true), None);
        older.landlock_abi = Some(5);
        older.landlock_enforcement = Some(amber_proto::LandlockEnforcement::Partial);
        older.landlock_missing = vec![amber_proto::LandlockGap {
            feature: "scope_signal".into(),
            abi: 6,
            fallback: "seccomp refuses signals to amberd".into(),
        }];
        let r = report(Some(older), selftest(&[true]));
        assert!(r.ok, "the other layers hold: {:?}", r.problems);
        let text = text(&r);
        assert!(
            text.contains("landlock     ABI 5 · partial enforcement (missing: scope_signal)"),
            "{text}"
        );
        assert_eq!(
            r.warnings,
            ["Landlock ABI 5 lacks scope_signal (ABI 6): seccomp refuses signals to amberd"]
        );
        assert!(
            text.contains("warning: Landlock ABI 5 lacks scope_signal"),
            "{text}"
        );
    }

    #[test]
    fn provider_trouble_is_a_warning() {
        let unconfigured = ProviderPart::new(
            ProviderStatus {
                base_url: None,
                model: "gpt-4o-mini".into(),
                key_set: false,
                flavor: None,
            },
            None,
            None,
        );
        assert!(warnings(Some(&unconfigured), None)[0].contains("no LLM endpoint"));
        let down = ProviderPart::new(
            ProviderStatus {
                base_url: Some("http://127.0.0.1:9/v1".into()),
                model: "m".into(),
                key_set: false,
                flavor: None,
            },
            Some("http://127.0.0.1:9/v1/models".into()),
            Some(Reach::Failed("connection refused".into())),
        );
        assert_eq!(
            warnings(Some(&down), None),
            ["the provider did not answer at http://127.0.0.1:9/v1/models: connection refused"]
        );
    }
}
