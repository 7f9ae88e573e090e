//! Shared by the fake-daemon tests: serving a jsonrpsee module on a Unix socket, as amberd
//! does, so the real `amber-cli` binary can talk to it.

use std::path::Path;

use jsonrpsee::server::{
    RpcModule, Server, ServerHandle, serve_with_graceful_shutdown, stop_channel,
};
use tokio::net::UnixListener;

/// Serves `methods` on a new socket at `socket` until the handle is stopped.
pub(crate) fn serve_module<C: Send + Sync + 'static>(
    socket: &Path,
    methods: RpcModule<C>,
) -> ServerHandle {
    let listener = UnixListener::bind(socket).unwrap();
    let (stop_handle, handle) = stop_channel();
    tokio::spawn(async move {
        let builder = Server::builder().to_service_builder();
        while let Ok((stream, _)) = listener.accept().await {
            let svc = builder.clone().build(methods.clone(), stop_handle.clone());
            tokio::spawn(serve_with_graceful_shutdown(
                stream,
                svc,
                stop_handle.clone().shutdown(),
            ));
        }
    });
    handle
}
