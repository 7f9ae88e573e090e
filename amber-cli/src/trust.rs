//! `trust`: what a workspace's configuration would do and where its trust stands
//! (`trust/list`), and a person's decision on one file's current version
//! (`trust/respond`). The decision names the version by its hash: when the file changed
//! between the listing the user reviewed and the answer, the daemon refuses it.

use std::path::Path;

use amber_client::Client;
use amber_proto::{
    TrustDecision, TrustFile, TrustListParams, TrustListResult, TrustRespondParams, TrustState,
    methods as m,
};
use anyhow::Context;

use crate::args::ConnectArgs;
use crate::output::{self, connect_options, note};
use crate::turn::exit;

/// `trust [--cwd DIR] [--json]`, or `trust [--cwd DIR] PATH [--hash H] [--deny] [--json]`.
pub(crate) async fn trust(
    conn: &ConnectArgs,
    cwd: Option<&Path>,
    path: Option<&str>,
    hash: Option<&str>,
    deny: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let cwd = crate::run_input::workspace(cwd)?;
    let client = Client::connect(connect_options(conn, false)).await?;
    let listed = list(&client, &cwd).await?;
    let Some(path) = path else {
        if json {
            output::line(&serde_json::to_string_pretty(&listed)?)?;
        } else {
            output::line(text(&listed).trim_end())?;
        }
        return Ok(exit::OK);
    };
    let relative = path.trim_start_matches("./");
    let Some(file) = listed.files.iter().find(|f| f.path == relative) else {
        note(&format!(
            "{relative} is not a configuration file of {cwd}; `amber-cli trust` lists them"
        ));
        return Ok(exit::ERROR);
    };
    let Some(hash) = hash.map(str::to_owned).or_else(|| file.hash.clone()) else {
        note(&format!(
            "{relative} cannot be read: {}",
            file.error.as_deref().unwrap_or("unknown error")
        ));
        return Ok(exit::ERROR);
    };
    let params = TrustRespondParams {
        cwd: cwd.clone(),
        path: relative.to_owned(),
        hash,
        decision: if deny {
            TrustDecision::Deny
        } else {
            TrustDecision::Trust
        },
    };
    let decided = client.request::<m::TrustRespond>(&params).await?;
    if json {
        output::line(&serde_json::to_string_pretty(&decided)?)?;
    } else {
        output::line(file_text(&decided).trim_end())?;
    }
    Ok(exit::OK)
}

/// `trust/list` for `cwd`.
pub(crate) async fn list(client: &Client, cwd: &str) -> anyhow::Result<TrustListResult> {
    client
        .request::<m::TrustList>(&TrustListParams {
            cwd: cwd.to_owned(),
        })
        .await
        .context("trust/list")
}

/// The listing as people read it.
pub(crate) fn text(listed: &TrustListResult) -> String {
    if listed.files.is_empty() {
        return format!(
            "{}: no workspace configuration (.amber/rules.toml, .amber/hooks.toml, .amber/agents/)\n",
            listed.cwd
        );
    }
    let mut out = format!("{}\n", listed.cwd);
    for file in &listed.files {
        out.push_str(&file_text(file));
    }
    let pending = listed
        .files
        .iter()
        .filter(|f| f.state == TrustState::Untrusted)
        .count();
    if pending > 0 {
        out.push_str(&format!(
            "{pending} file(s) untrusted: review them, then `amber-cli trust PATH` (or `--deny`)\n"
        ));
    }
    out
}

fn file_text(file: &TrustFile) -> String {
    let hash = file
        .hash
        .as_deref()
        .map(|h| format!(" {}", &h[..12.min(h.len())]))
        .unwrap_or_default();
    let mut out = format!(
        "  {:<9} {} ({}){hash}\n",
        file.state.as_str(),
        file.path,
        file.kind.as_str()
    );
    for effect in &file.effects {
        out.push_str(&format!("      {effect}\n"));
    }
    if let Some(error) = &file.error {
        out.push_str(&format!("      {error}\n"));
    }
    out
}
