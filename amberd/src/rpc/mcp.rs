//! `mcp/add`, `mcp/list` and `mcp/remove` over the daemon's [`crate::mcp::McpHost`].
//! `mcp/add` answers at once with status `connecting`; the outcome arrives as
//! `mcp_status` events and in `mcp/list`.

use amber_proto::{self as proto, methods};
use jsonrpsee::types::ErrorObjectOwned;

use super::params::error;
use super::table::MethodTable;
use crate::mcp::McpError;

impl From<McpError> for ErrorObjectOwned {
    fn from(err: McpError) -> Self {
        error(err.code(), err.to_string())
    }
}

pub(super) fn register(m: &mut MethodTable) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    m.method::<methods::McpAdd>(|p, d, _| Ok(d.mcp.add(&p.name, p.transport)?))?;

    m.method::<methods::McpList>(|proto::Empty {}, d, _| {
        Ok(proto::McpListResult {
            servers: d.mcp.list(),
        })
    })?;

    m.async_method::<methods::McpRemove, _, _>(|p, d, _| async move {
        d.mcp.remove(&p.name).await?;
        Ok(proto::Empty {})
    })?;

    Ok(())
}
