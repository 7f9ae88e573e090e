//! One runner's control connection: its requests (`runner/hello`, then `runner/poll` and
//! `runner/heartbeat`, side by side) answered on the same connection, a line each. A line
//! that is not JSON-RPC gets -32700 and the connection goes on; a line longer than the
//! limit ends it.

use std::sync::Arc;

use amber_executor::runner_wire::{
    HeartbeatParams, HelloParams, PollParams, PollResult, code, method,
};
use amber_executor::wire::{self, Frame, RpcError};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::Fleet;

/// The longest request a runner may send.
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Serves runner `runner` of `pool` on one connection until it ends.
pub(crate) async fn serve<R, W>(
    fleet: Arc<Fleet>,
    pool: String,
    runner: String,
    reader: R,
    writer: W,
) where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outbox, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    let writing = tokio::spawn(async move {
        let mut writer = writer;
        while let Some(line) = outgoing.recv().await {
            if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                return;
            }
        }
    });
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut generation = None;
    loop {
        line.clear();
        match amber_executor::connection::read_line(&mut reader, &mut line, MAX_REQUEST_BYTES).await
        {
            Ok(true) => {}
            Ok(false) => break,
            Err(err) => {
                tracing::warn!(%runner, "dropping a runner's connection: {err}");
                break;
            }
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let frame: Frame = match serde_json::from_slice(&line) {
            Ok(frame) => frame,
            Err(err) => {
                let _ = outbox.send(answer(
                    Value::Null,
                    Err(RpcError::new(
                        wire::code::PARSE_ERROR,
                        format!("not JSON: {err}"),
                    )),
                ));
                continue;
            }
        };
        let (Some(id), Some(name)) = (frame.id, frame.method) else {
            continue;
        };
        let params = frame.params.unwrap_or(Value::Null);
        let Some(current) = generation else {
            let result = if name == method::HELLO {
                parse::<HelloParams>(params).and_then(|hello| fleet.hello(&pool, &runner, hello))
            } else {
                Err(RpcError::new(code::NO_HELLO, "say runner/hello first"))
            };
            let result = result.map(|(g, hello)| {
                generation = Some(g);
                serde_json::to_value(hello).unwrap_or(Value::Null)
            });
            let refused = result.is_err() && name == method::HELLO;
            let _ = outbox.send(answer(id, result));
            if refused {
                break;
            }
            continue;
        };
        match name.as_str() {
            method::POLL => {
                let fleet = Arc::clone(&fleet);
                let outbox = outbox.clone();
                let runner = runner.clone();
                tokio::spawn(async move {
                    let result = match parse::<PollParams>(params) {
                        Ok(poll) => {
                            let assign = fleet.poll(&runner, current, poll.free).await;
                            Ok(serde_json::to_value(PollResult { assign }).unwrap_or(Value::Null))
                        }
                        Err(err) => Err(err),
                    };
                    let _ = outbox.send(answer(id, result));
                });
            }
            method::HEARTBEAT => {
                let result = parse::<HeartbeatParams>(params)
                    .and_then(|beat| fleet.beat(&runner, current, beat))
                    .map(|r| serde_json::to_value(r).unwrap_or(Value::Null));
                let _ = outbox.send(answer(id, result));
            }
            other => {
                let _ = outbox.send(answer(
                    id,
                    Err(RpcError::new(
                        wire::code::METHOD_NOT_FOUND,
                        format!("no method `{other}` on a runner's connection"),
                    )),
                ));
            }
        }
    }
    if let Some(generation) = generation {
        fleet.disconnected(&runner, generation);
    }
    drop(outbox);
    let _ = writing.await;
}

fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(wire::code::INVALID_PARAMS, e.to_string()))
}

fn answer(id: Value, result: Result<Value, RpcError>) -> Vec<u8> {
    wire::line_of(&Frame::response(id, result))
}
