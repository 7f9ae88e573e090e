//! What `doctor` found, as one value: its JSON shape (`--json`), its human text, and the
//! verdict the exit code follows. Pure: no I/O.

use amber_proto::{ProviderCheckResult, ProviderStatus, SandboxSelftestResult, SandboxStatus};
use serde::Serialize;

use super::reach::Reach;
use crate::daemon::uptime;

/// Everything `doctor` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Report {
    /// The sandbox is available, every self-test check passed, and the provider is usable
    /// (configured, reachable, its key accepted, the model one it serves).
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
    /// Whether amberd's key was accepted (`provider/check`); absent when it could not tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_accepted: Option<bool>,
    /// Whether the provider serves the model; absent when it could not tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_known: Option<bool>,
    /// What the provider lists (at most 50).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

impl ProviderPart {
    /// From amberd's own check (`provider/check`: with its key, from where it runs).
    pub(super) fn checked(
        status: ProviderStatus,
        url: Option<String>,
        check: ProviderCheckResult,
    ) -> Self {
        ProviderPart {
            status,
            url,
            reachable: check.base_url.is_some().then_some(check.reachable),
            http_status: check.status,
            error: check.error,
            key_accepted: check.key_accepted,
            model_known: check.model_known,
            models: check.models,
        }
    }

    /// From this client's own GET, without a key (an amberd without `provider/check`).
    pub(super) fn reached(
        status: ProviderStatus,
        url: Option<String>,
        reach: Option<Reach>,
    ) -> Self {
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
            key_accepted: None,
            model_known: None,
            models: Vec::new(),
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
pub(super) fn problems(
    provider: Option<&ProviderPart>,
    sandbox: Option<&SandboxStatus>,
    selftest: &SelftestPart,
) -> Vec<String> {
    let mut out = provider_problems(provider);
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

/// Findings worth a warning that do not fail the check: each Landlock feature an older
/// kernel ABI lacks (the sandbox's other layers still hold; the warning says how far).
pub(super) fn warnings(sandbox: Option<&SandboxStatus>) -> Vec<String> {
    let mut out = Vec::new();
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

/// What keeps the provider from working, each with what to do: nothing configured, no
/// answer, the key refused, the model not served.
fn provider_problems(provider: Option<&ProviderPart>) -> Vec<String> {
    let Some(p) = provider else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if p.status.base_url.is_none() {
        out.push(
            "no LLM endpoint is configured: set AMBER_BASE_URL (and AMBER_MODEL, AMBER_API_KEY), \
             or [provider] base_url in config.toml, or a key such as OPENAI_API_KEY"
                .to_owned(),
        );
        return out;
    }
    let url = p.url.as_deref().unwrap_or("the provider");
    match (p.reachable, p.key_accepted, p.model_known) {
        (Some(false), _, _) => out.push(format!(
            "the provider did not answer at {url}: {} (is the server running, the URL right?)",
            p.error.as_deref().unwrap_or("no answer")
        )),
        (_, Some(false), _) => out.push(format!(
            "the provider refused amberd's key{}: check it (AMBER_API_KEY or the provider's key \
             variable), then `amber-cli daemon restart`",
            if p.status.key_set {
                ""
            } else {
                " (none is set)"
            }
        )),
        (_, _, Some(false)) => {
            let listed = match p.models.len() {
                0 => String::new(),
                n => format!(
                    "; it lists {}{}",
                    p.models
                        .iter()
                        .take(8)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    if n > 8 { ", …" } else { "" }
                ),
            };
            out.push(format!(
                "the provider does not serve the model `{}`{listed}: set AMBER_MODEL or \
                 [provider] model",
                p.status.model
            ));
        }
        _ => {}
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
            if let Some(accepted) = p.key_accepted {
                let verdict = if accepted { "accepted" } else { "REFUSED" };
                lines.push(row("key", verdict));
            }
            if let Some(known) = p.model_known {
                let verdict = if known {
                    "served".to_owned()
                } else {
                    format!("NOT SERVED ({})", p.status.model)
                };
                lines.push(row("model", &verdict));
            }
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
            let network = match &s.allowlist_unavailable {
                Some(why) if s.network_mode == amber_proto::NetworkMode::Allowlist => {
                    format!("allowlist, DEGRADED to off: {why}")
                }
                _ => s.network_mode.as_str().to_owned(),
            };
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
            let namespaces = match (s.available, s.namespaces) {
                (Some(true), Some(false)) => {
                    "no: Landlock and seccomp alone ([sandbox] in_place; see docs/security.md)"
                }
                _ => yes_no(s.namespaces),
            };
            lines.push(row("namespaces", namespaces));
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
            network_mode: amber_proto::NetworkMode::Off,
            allowlist_unavailable: None,
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
        let provider = Some(ProviderPart::reached(
            ProviderStatus {
                base_url: Some("http://127.0.0.1:8080/v1".into()),
                model: "qwen3".into(),
                key_set: true,
                flavor: None,
            },
            Some("http://127.0.0.1:8080/v1/models".into()),
            Some(Reach::Answered(200)),
        ));
        let problems = problems(provider.as_ref(), sandbox.as_ref(), &selftest);
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
            warnings: warnings(sandbox.as_ref()),
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
    fn provider_trouble_fails_the_check_saying_what_to_do() {
        let status = |base_url: Option<&str>, key_set: bool| ProviderStatus {
            base_url: base_url.map(str::to_owned),
            model: "qwen3".into(),
            key_set,
            flavor: None,
        };
        let url = Some("http://127.0.0.1:9/v1/models".to_owned());
        let check = |reachable, key_accepted, model_known, models: &[&str]| ProviderCheckResult {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: "qwen3".into(),
            key_set: true,
            reachable,
            status: reachable.then_some(200),
            key_accepted,
            model_known,
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            error: (!reachable).then(|| "connection refused".to_owned()),
        };
        // (what was found, the problem it is, or none)
        let table: Vec<(ProviderPart, Option<&str>)> = vec![
            (
                ProviderPart::reached(status(None, false), None, None),
                Some("no LLM endpoint is configured"),
            ),
            (
                ProviderPart::checked(
                    status(Some("x"), true),
                    url.clone(),
                    check(false, None, None, &[]),
                ),
                Some("did not answer at http://127.0.0.1:9/v1/models: connection refused"),
            ),
            (
                ProviderPart::checked(
                    status(Some("x"), true),
                    url.clone(),
                    check(true, Some(false), None, &[]),
                ),
                Some("refused amberd's key"),
            ),
            (
                ProviderPart::checked(
                    status(Some("x"), false),
                    url.clone(),
                    check(true, Some(false), None, &[]),
                ),
                Some("(none is set)"),
            ),
            (
                ProviderPart::checked(
                    status(Some("x"), true),
                    url.clone(),
                    check(true, Some(true), Some(false), &["llama3", "mistral"]),
                ),
                Some("does not serve the model `qwen3`; it lists llama3, mistral"),
            ),
            (
                ProviderPart::checked(
                    status(Some("x"), true),
                    url.clone(),
                    check(true, Some(true), Some(true), &["qwen3"]),
                ),
                None,
            ),
            // An older amberd: only this client's GET, which any answer satisfies.
            (
                ProviderPart::reached(
                    status(Some("x"), true),
                    url.clone(),
                    Some(Reach::Answered(401)),
                ),
                None,
            ),
        ];
        let fine = selftest(&[true]);
        for (part, problem) in table {
            let found = problems(Some(&part), None, &fine);
            // Without a sandbox report there is always that problem; the provider's comes first.
            match problem {
                Some(needle) => assert!(found[0].contains(needle), "{needle}: {found:?}"),
                None => assert_eq!(found.len(), 1, "{found:?}"),
            }
        }
    }
}
