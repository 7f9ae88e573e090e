//! `mcp login|logout NAME`: OAuth for a configured HTTP MCP server (`mcp/login`,
//! `mcp/logout`). The flow runs in amberd, which keeps the tokens; this command prints the
//! authorization URL (and opens a browser when it can), then waits until the server is
//! ready with them.

use std::time::{Duration, Instant};

use amber_client::Client;
use amber_proto::methods as m;
use amber_proto::{Empty, McpStatus, NameParams};

use crate::args::ConnectArgs;
use crate::output::{self, connect_options};
use crate::turn::exit;

/// How long `login` waits for the person to finish in the browser.
const LOGIN_WAIT: Duration = Duration::from_secs(600);

async fn connect(conn: &ConnectArgs) -> anyhow::Result<Client> {
    Ok(Client::connect(connect_options(conn, false)).await?)
}

/// `mcp login NAME [--no-browser]`.
/// `--client-id` and `--client-secret-env`: a client registered beforehand.
pub(crate) struct PreRegistered {
    pub client_id: Option<String>,
    pub client_secret_env: Option<String>,
}

pub(crate) async fn login(
    conn: &ConnectArgs,
    name: &str,
    no_browser: bool,
    registered: PreRegistered,
) -> anyhow::Result<u8> {
    let client_secret = match &registered.client_secret_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            anyhow::anyhow!("--client-secret-env {var}: the variable is not set (or not UTF-8)")
        })?),
        None => None,
    };
    let client = connect(conn).await?;
    let started = client
        .request::<m::McpLogin>(&amber_proto::McpLoginParams {
            name: name.to_owned(),
            client_id: registered.client_id,
            client_secret,
        })
        .await?;
    // stdout: the URL alone, so a script (or a test) can follow it.
    output::line(&started.authorization_url)?;
    if no_browser || !open_browser(&started.authorization_url) {
        eprintln!("amber-cli: open the URL above in a browser to sign in to `{name}`");
    }
    let deadline = Instant::now() + LOGIN_WAIT;
    loop {
        let listed = client.request::<m::McpList>(&Empty {}).await?;
        let row = listed.servers.into_iter().find(|s| s.name == name);
        // Ready once this login is through (a server connected before it stays ready).
        if let Some(row) = &row
            && row.status == McpStatus::Ready
            && !row.signing_in
            && !row
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("OAuth login failed"))
        {
            eprintln!(
                "amber-cli: signed in; `{name}` is ready ({} tools)",
                row.tools
            );
            return Ok(exit::OK);
        }
        if let Some(why) = row
            .as_ref()
            .and_then(|r| r.error.as_deref())
            .filter(|e| e.starts_with("OAuth login failed"))
        {
            eprintln!("amber-cli: `{name}`: {why}");
            return Ok(exit::ERROR);
        }
        if Instant::now() > deadline {
            let why = row.and_then(|r| r.error).unwrap_or_default();
            eprintln!("amber-cli: `{name}` is not ready after 10 minutes {why}");
            return Ok(exit::ERROR);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `mcp logout NAME`.
pub(crate) async fn logout(conn: &ConnectArgs, name: &str) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    let done = client
        .request::<m::McpLogout>(&NameParams {
            name: name.to_owned(),
        })
        .await?;
    output::line(if done.removed {
        "signed out: the stored tokens are gone"
    } else {
        "no stored tokens for this server"
    })?;
    Ok(exit::OK)
}

/// Opens `url` with the desktop's browser (`$BROWSER`, else `xdg-open`) when there is a
/// display to show it on; false when nothing was started.
fn open_browser(url: &str) -> bool {
    let graphical = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .or_else(|| graphical.then(|| "xdg-open".to_owned()));
    let Some(opener) = opener else {
        return false;
    };
    // The user's own browser, on the user's command, with a URL amberd's login made.
    #[allow(clippy::disallowed_methods)]
    let started = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    started.is_ok()
}
