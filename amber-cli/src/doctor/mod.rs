//! `doctor`: is this amber set up to work, and safely? Connects like every command (it
//! autostarts amberd unless `--no-autostart`), reads `daemon/status` (versions, pid, uptime,
//! the provider, what the kernel offers the sandbox), has amberd check its provider
//! (`provider/check`; an older amberd: a keyless GET of `/models` from here, [`reach`])
//! while the daemon runs `sandbox/selftest`, then reads `daemon/status`
//! again (the self-test waits for the daemon's start-up probe, so its verdict is in), asks
//! `trust/list` what the workspace (`--cwd`, else the current directory) would load, and
//! prints one report ([`report`]): human text, or one JSON object with `--json`.
//!
//! Exit 0 when the sandbox is available, every self-test check passed and the provider is
//! usable: configured, answering, amberd's key accepted and the model one it serves (amberd
//! checks that itself, `provider/check`: the models list, else one token). Exit 1 when any
//! of these fails, each said with what to do, and when amberd cannot be reached.

mod reach;
mod report;

use amber_client::{Client, ClientError};
use amber_proto::{DaemonStatus, Empty, methods};

use crate::args::ConnectArgs;
use crate::output::{self, connect_options};
use crate::turn::exit;
use report::{DaemonPart, Peer, ProviderPart, Report, SelftestPart, WorkspacePart};

/// `doctor [--json] [--cwd DIR]`.
pub(crate) async fn doctor(
    conn: &ConnectArgs,
    json: bool,
    cwd: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    let client = match Client::connect(connect_options(conn, false)).await {
        Ok(client) => client,
        Err(err) => return unreachable(&err, json),
    };
    let status = match client.request::<methods::DaemonStatus>(&Empty {}).await {
        Ok(status) => status,
        Err(err) => return unreachable(&err, json),
    };
    let provider = status.provider.clone();
    let url = provider
        .as_ref()
        .and_then(|p| p.base_url.as_deref())
        .map(reach::models_url);
    // amberd checks its provider itself (with its key, from where it runs); an older one
    // without `provider/check` gets this client's keyless GET.
    let probe = async {
        let checked = client
            .request::<methods::ProviderCheck>(&amber_proto::ProviderCheckParams::default())
            .await;
        match checked {
            Ok(check) => Probe::Checked(check),
            Err(err) if err.code() == Some(amber_proto::errors::METHOD_NOT_FOUND) => match &url {
                Some(url) => Probe::Reached(Some(reach::get(url).await)),
                None => Probe::Reached(None),
            },
            Err(err) => Probe::Reached(Some(reach::Reach::Failed(err.to_string()))),
        }
    };
    let selftest = async {
        client
            .request::<methods::SandboxSelftest>(&Empty {})
            .await
            .map_err(|e| e.to_string())
    };
    let (reach, selftest) = tokio::join!(probe, selftest);
    // After the self-test, which waited for the start-up probe: its verdict is in.
    let status = client
        .request::<methods::DaemonStatus>(&Empty {})
        .await
        .unwrap_or(status);
    let workspace = workspace_part(&client, cwd).await;
    let mut report = build(
        &client,
        status,
        provider.map(|p| match reach {
            Probe::Checked(check) => ProviderPart::checked(p, url, check),
            Probe::Reached(reach) => ProviderPart::reached(p, url, reach),
        }),
        SelftestPart::from_call(selftest),
    );
    report
        .warnings
        .extend(report::workspace_warnings(&workspace));
    report.workspace = Some(workspace);
    if json {
        output::line(&serde_json::to_string_pretty(&report)?)?;
    } else {
        output::line(&report::text(&report))?;
    }
    for problem in &report.problems {
        output::note(problem);
    }
    Ok(if report.ok { exit::OK } else { exit::ERROR })
}

fn build(
    client: &Client,
    status: DaemonStatus,
    provider: Option<ProviderPart>,
    selftest: SelftestPart,
) -> Report {
    let server = &client.server_info().server_info;
    let mut problems = report::problems(provider.as_ref(), status.sandbox.as_ref(), &selftest);
    if let Some(error) = &status.config_error {
        problems.push(format!(
            "the last edit of the config was not applied (the one before it is in force): {}",
            error.trim_end()
        ));
    }
    Report {
        ok: problems.is_empty(),
        client: Peer {
            name: "amber-cli".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        },
        daemon: DaemonPart {
            name: if server.name.is_empty() {
                "amberd".to_owned()
            } else {
                server.name.clone()
            },
            version: status.version,
            pid: status.pid,
            uptime_ms: status.uptime_ms,
            socket: client.socket().display().to_string(),
        },
        warnings: report::warnings(status.sandbox.as_ref()),
        provider,
        sandbox: status.sandbox,
        selftest,
        problems,
        workspace: None,
    }
}

/// What the workspace would load (`trust/list`); a directory amber would not take as a
/// workspace is reported, never a failure.
async fn workspace_part(client: &Client, cwd: Option<&std::path::Path>) -> WorkspacePart {
    let dir = match crate::run_input::workspace(cwd) {
        Ok(dir) => dir,
        Err(err) => return WorkspacePart::error(cwd, format!("{err:#}")),
    };
    match crate::trust::list(client, &dir).await {
        Ok(listed) => WorkspacePart {
            cwd: listed.cwd,
            files: listed.files,
            error: None,
        },
        Err(err) => WorkspacePart::error(Some(std::path::Path::new(&dir)), format!("{err:#}")),
    }
}

/// What was learnt of the provider.
enum Probe {
    /// amberd's own `provider/check`.
    Checked(amber_proto::ProviderCheckResult),
    /// This client's keyless GET (`None`: no base URL to try).
    Reached(Option<reach::Reach>),
}

/// amberd cannot be reached (or started): say so plainly, exit 1.
fn unreachable(err: &ClientError, json: bool) -> anyhow::Result<u8> {
    let message = format!("cannot reach amberd: {err}");
    if json {
        output::line(&serde_json::to_string_pretty(&serde_json::json!({
            "ok": false,
            "client": {"name": "amber-cli", "version": env!("CARGO_PKG_VERSION")},
            "error": message,
        }))?)?;
    }
    output::note(&message);
    Ok(exit::ERROR)
}
