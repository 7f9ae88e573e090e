//! `mcp/add`, `mcp/list` and `mcp/remove` over the daemon's [`crate::mcp::McpHost`].
//! `mcp/add` answers at once with status `connecting`; the outcome arrives as
//! `mcp_status` events and in `mcp/list`.

use std::sync::Arc;

use amber_proto::{self as proto, methods};
use jsonrpsee::RpcModule;
use jsonrpsee::types::ErrorObjectOwned;

use super::params::{error, parse};
use crate::daemon::Daemon;
use crate::mcp::McpError;

type RpcResult<T> = Result<T, ErrorObjectOwned>;

impl From<McpError> for ErrorObjectOwned {
    fn from(err: McpError) -> Self {
        error(err.code(), err.to_string())
    }
}

pub(super) fn register(
    m: &mut RpcModule<Arc<Daemon>>,
) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    m.register_method(methods::MCP_ADD, |params, d, _| -> RpcResult<_> {
        let p: proto::McpAddParams = parse(&params)?;
        Ok(d.mcp.add(&p.name, p.transport)?)
    })?;

    m.register_method(methods::MCP_LIST, |params, d, _| -> RpcResult<_> {
        parse::<proto::Empty>(&params)?;
        Ok(proto::McpListResult {
            servers: d.mcp.list(),
        })
    })?;

    m.register_async_method(methods::MCP_REMOVE, |params, d, _| async move {
        let p: proto::NameParams = parse(&params)?;
        d.mcp.remove(&p.name).await?;
        RpcResult::Ok(proto::Empty {})
    })?;

    Ok(())
}
