//! Helpers for the amber extension methods the TUI calls (`command/*`, `status/get`,
//! `panel/*`) on top of amber-client's typed `request`.

use amber_client::{Client, ClientError};
use amber_proto::methods;
use amber_proto::{
    CommandListResult, CommandRunParams, CommandRunResult, Empty, PanelGetParams, PanelGetResult,
    PanelListResult, SessionIdParams, StatusGetResult,
};
use serde_json::Value;

pub async fn command_list(client: &Client) -> Result<CommandListResult, ClientError> {
    client.request::<methods::CommandList>(&Empty {}).await
}

/// `command/run` with the text after the name as `args` (absent when empty).
pub async fn command_run(
    client: &Client,
    session_id: &str,
    name: &str,
    args: &str,
) -> Result<CommandRunResult, ClientError> {
    let params = CommandRunParams {
        session_id: Some(session_id.to_owned()),
        name: name.to_owned(),
        args: if args.is_empty() {
            Value::Null
        } else {
            Value::String(args.to_owned())
        },
    };
    client.request::<methods::CommandRun>(&params).await
}

pub async fn status_get(client: &Client, session_id: &str) -> Result<StatusGetResult, ClientError> {
    let params = SessionIdParams {
        session_id: session_id.to_owned(),
    };
    client.request::<methods::StatusGet>(&params).await
}

pub async fn panel_list(client: &Client) -> Result<PanelListResult, ClientError> {
    client.request::<methods::PanelList>(&Empty {}).await
}

pub async fn panel_get(
    client: &Client,
    session_id: &str,
    name: &str,
) -> Result<PanelGetResult, ClientError> {
    let params = PanelGetParams {
        session_id: Some(session_id.to_owned()),
        name: name.to_owned(),
    };
    client.request::<methods::PanelGet>(&params).await
}
