//! `doctor`: is this amber set up to work, and safely? Connects like every command (it
//! autostarts amberd unless `--no-autostart`), reads `daemon/status` (versions, pid, uptime,
//! the provider, what the kernel offers the sandbox), GETs the provider's `/models` from
//! here ([`reach`]) while the daemon runs `sandbox/selftest`, then reads `daemon/status`
//! again (the self-test waits for the daemon's start-up probe, so its verdict is in), asks
//! `trust/list` what the workspace (`--cwd`, else the current directory) would load, and
//! prints one report ([`report`]): human text, or one JSON object with `--json`.
//!
//! Exit 0 when the sandbox is available and every self-test check passed; 1 when not, and
//! when amberd cannot be reached (with its own message). Provider trouble is a warning.

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
    let probe = async {
        match &url {
            Some(url) => Some(reach::get(url).await),
            None => None,
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
        provider.map(|p| ProviderPart::new(p, url, reach)),
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
    let problems = report::problems(status.sandbox.as_ref(), &selftest);
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
        warnings: report::warnings(provider.as_ref(), status.sandbox.as_ref()),
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
