//! `routine/add`, `routine/list`, `routine/remove`, `routine/run` and `routine/tick` over
//! the daemon's [`crate::routines::Routines`]. Each runs off the runtime's threads: a fire
//! makes sessions (a worktree, a store directory) and every change is synced to disk.

use std::sync::Arc;

use amber_proto::{self as proto, errors, methods};
use jsonrpsee::types::ErrorObjectOwned;

use super::params::error;
use super::table::{MethodTable, RpcResult};
use crate::daemon::Daemon;
use crate::routines::{Manager, RoutineError, configured};

impl From<RoutineError> for ErrorObjectOwned {
    fn from(err: RoutineError) -> Self {
        match err {
            RoutineError::Store(_) => error(errors::INTERNAL_ERROR, err.to_string()),
            RoutineError::NotFound(_) | RoutineError::FromConfig(_) => error(
                errors::INVALID_PARAMS,
                format!("invalid params: name: {err}"),
            ),
            RoutineError::Invalid(_) | RoutineError::Exists(_) => {
                error(errors::INVALID_PARAMS, err.to_string())
            }
        }
    }
}

/// Runs `work` on a blocking thread with the daemon.
async fn blocking<T: Send + 'static>(
    daemon: Arc<Daemon>,
    work: impl FnOnce(&Daemon) -> RpcResult<T> + Send + 'static,
) -> RpcResult<T> {
    tokio::task::spawn_blocking(move || work(&daemon))
        .await
        .map_err(|e| error(errors::INTERNAL_ERROR, format!("routine call failed: {e}")))?
}

pub(super) fn register(m: &mut MethodTable) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    m.async_method::<methods::RoutineAdd, _, _>(|p, d, _| {
        blocking(d, move |d| {
            Ok(d.routines.add(p, &configured(d), &Manager(&d.sessions))?)
        })
    })?;

    m.async_method::<methods::RoutineList, _, _>(|proto::Empty {}, d, _| {
        blocking(d, |d| {
            Ok(proto::RoutineListResult {
                routines: d.routines.list(&configured(d), &Manager(&d.sessions)),
            })
        })
    })?;

    m.async_method::<methods::RoutineRemove, _, _>(|p, d, _| {
        blocking(d, move |d| {
            d.routines.remove(&p.name, &configured(d))?;
            Ok(proto::Empty {})
        })
    })?;

    m.async_method::<methods::RoutineRun, _, _>(|p, d, _| {
        blocking(d, move |d| {
            Ok(d.routines
                .run_now(&p.name, &configured(d), &Manager(&d.sessions))?)
        })
    })?;

    m.async_method::<methods::RoutineTick, _, _>(|proto::Empty {}, d, _| {
        blocking(d, |d| {
            Ok(proto::RoutineTickResult {
                fired: d.routines.tick(&configured(d), &Manager(&d.sessions)),
            })
        })
    })?;

    Ok(())
}
