//! `mcp/add`, `mcp/list`, `mcp/remove`, `mcp/login` and `mcp/logout` over the daemon's
//! [`crate::mcp::McpHost`];
//! `mcp/add {sessionId}` over that session's own servers (`session/mcp.rs`).
//! `mcp/add` answers at once with status `connecting`; the outcome arrives as
//! `mcp_status` events and in `mcp/list`.

use amber_proto::{self as proto, errors, methods};
use jsonrpsee::types::ErrorObjectOwned;

use super::params::error;
use super::table::MethodTable;
use crate::mcp::McpError;
use crate::session::features::mcp::SessionMcp;

impl From<McpError> for ErrorObjectOwned {
    fn from(err: McpError) -> Self {
        error(err.code(), err.to_string())
    }
}

pub(super) fn register(m: &mut MethodTable) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    m.async_method::<methods::McpAdd, _, _>(|p, d, _| async move {
        let Some(session_id) = p.session_id else {
            return Ok(d.mcp.add(&p.name, p.transport)?);
        };
        // For one session only: kept in its metadata, gone with it.
        let session = d.sessions.get(&session_id)?;
        let server = proto::SessionMcpServer {
            name: p.name,
            transport: p.transport,
        };
        let mcp = session.shared.feature::<SessionMcp>().ok_or_else(|| {
            error(
                errors::INTERNAL_ERROR,
                "this daemon runs no session MCP servers",
            )
        })?;
        let (info, changed) = mcp.add(server).await?;
        if changed {
            session.shared.save_meta();
        }
        Ok(info)
    })?;

    m.method::<methods::McpList>(|proto::Empty {}, d, _| {
        Ok(proto::McpListResult {
            servers: d.mcp.list(),
        })
    })?;

    m.async_method::<methods::McpRemove, _, _>(|p, d, _| async move {
        d.mcp.remove(&p.name).await?;
        Ok(proto::Empty {})
    })?;

    m.async_method::<methods::McpLogin, _, _>(|p, d, _| async move {
        Ok(proto::McpLoginResult {
            authorization_url: d
                .mcp
                .login(&p.name, p.client_id.clone(), p.client_secret.clone())
                .await?,
        })
    })?;

    m.method::<methods::McpLogout>(|p, d, _| {
        Ok(proto::McpLogoutResult {
            removed: d.mcp.logout(&p.name)?,
        })
    })?;

    Ok(())
}
