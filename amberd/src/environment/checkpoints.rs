//! A remote session's checkpoints over its link: `RemoteWorkspace` in the executor
//! protocol's `checkpoint/*` requests. The checkpoint code calls it from the blocking pool;
//! each call is sent on the runtime and waited for there.

use std::sync::Arc;

use amber_executor::wire::{
    Blob, CheckpointReadParams, CheckpointReadResult, CheckpointRestParams, CheckpointRestResult,
    CheckpointRestoreParams, CheckpointRestoreResult, CheckpointStageParams, CheckpointTakeParams,
    CheckpointTakeResult, WantedBlob, method,
};
use amber_store::{Applied, BlobStore, Hash, Refused, RelPath, RestorePlan, SnapshotDelta};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::de::DeserializeOwned;

use super::link::{Direct, ExecutorLink};
use crate::checkpoints::{RemoteRead, RemoteWorkspace};

/// Content bytes staged in one request at most (the executor reads lines up to 64 MiB;
/// base64 adds a third).
const STAGE_BATCH_BYTES: usize = 16 << 20;

/// One session's workspace on its executor.
pub(crate) struct RemoteCheckpoints {
    via: Via,
    session: String,
    runtime: tokio::runtime::Handle,
}

/// How the calls reach the executor.
enum Via {
    /// Through the link, which connects (or starts a new executor) as needed.
    Link(Arc<ExecutorLink>),
    /// Straight on a new executor's connection, from its arrival hook.
    Direct(Direct),
}

impl RemoteCheckpoints {
    /// Calls are sent on `runtime` (the daemon's).
    pub(crate) fn new(
        link: Arc<ExecutorLink>,
        session: String,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self {
            via: Via::Link(link),
            session,
            runtime,
        }
    }

    /// For an arrival hook: calls go on `direct` alone.
    pub(crate) fn direct(direct: Direct, session: String, runtime: tokio::runtime::Handle) -> Self {
        Self {
            via: Via::Direct(direct),
            session,
            runtime,
        }
    }

    /// Sends one request and waits for its answer. Blocking: never called on a runtime
    /// thread (the checkpoint code runs on the blocking pool).
    fn call<P, R>(&self, method: &'static str, params: P) -> Result<R, String>
    where
        P: serde::Serialize + Send + Sync + 'static,
        R: DeserializeOwned,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        match &self.via {
            Via::Link(link) => {
                let link = Arc::clone(link);
                self.runtime.spawn(async move {
                    let _ = tx.send(link.call(method, &params).await);
                });
            }
            Via::Direct(direct) => {
                let direct = direct.clone();
                self.runtime.spawn(async move {
                    let _ = tx.send(direct.call(method, &params).await);
                });
            }
        }
        let value = rx
            .recv()
            .map_err(|_| "the daemon is stopping".to_owned())?
            .map_err(|e| e.message)?;
        serde_json::from_value(value).map_err(|e| format!("{method}: a malformed answer: {e}"))
    }
}

impl RemoteWorkspace for RemoteCheckpoints {
    fn take(&self, base: Option<u64>, max_file_bytes: u64) -> Result<(u64, SnapshotDelta), String> {
        let mut taken: CheckpointTakeResult = self.call(
            method::CHECKPOINT_TAKE,
            CheckpointTakeParams {
                session: self.session.clone(),
                base,
                max_file_bytes,
            },
        )?;
        // A large snapshot comes in parts; the count it announced bounds the asking.
        let mut left = taken.rest;
        while left > 0 {
            let part: CheckpointRestResult = self.call(
                method::CHECKPOINT_REST,
                CheckpointRestParams {
                    session: self.session.clone(),
                    take: taken.take,
                },
            )?;
            if part.changed.is_empty() || part.rest >= left {
                return Err(format!(
                    "the executor's snapshot {} stopped coming ({left} entries announced)",
                    taken.take
                ));
            }
            taken.snapshot.changed.extend(part.changed);
            left = part.rest;
        }
        Ok((taken.take, taken.snapshot))
    }

    fn read(&self, wanted: &[(RelPath, Hash)]) -> Result<RemoteRead, String> {
        let read: CheckpointReadResult = self.call(
            method::CHECKPOINT_READ,
            CheckpointReadParams {
                session: self.session.clone(),
                blobs: wanted
                    .iter()
                    .map(|(path, hash)| WantedBlob {
                        path: path.clone(),
                        hash: *hash,
                    })
                    .collect(),
            },
        )?;
        let blobs = read
            .blobs
            .into_iter()
            .map(|b| {
                BASE64
                    .decode(&b.data)
                    .map_err(|e| format!("blob {}: not base64: {e}", b.hash))
            })
            .collect::<Result<_, _>>()?;
        Ok(RemoteRead {
            blobs,
            unread: read
                .unread
                .into_iter()
                .map(|u| (u.path, u.hash, u.reason))
                .collect(),
        })
    }

    fn restore(&self, plan: &RestorePlan, store: &BlobStore) -> Result<Applied, String> {
        let mut hashes: Vec<Hash> = plan.write.iter().map(|e| e.hash).collect();
        hashes.sort_by_key(Hash::to_hex);
        hashes.dedup();
        let mut batch = Vec::new();
        let mut size = 0;
        for hash in hashes {
            let bytes = store.get(&hash).map_err(|e| e.to_string())?;
            size += bytes.len();
            batch.push(Blob {
                hash,
                data: BASE64.encode(&bytes),
            });
            if size >= STAGE_BATCH_BYTES {
                self.stage(std::mem::take(&mut batch))?;
                size = 0;
            }
        }
        if !batch.is_empty() {
            self.stage(batch)?;
        }
        let done: CheckpointRestoreResult = self.call(
            method::CHECKPOINT_RESTORE,
            CheckpointRestoreParams {
                session: self.session.clone(),
                plan: plan.clone(),
            },
        )?;
        Ok(Applied {
            written: done.written,
            deleted: done.deleted,
            refused: done
                .refused
                .into_iter()
                .map(|r| Refused {
                    path: r.path,
                    refusal: amber_store::Refusal::Reported(r.reason),
                })
                .collect(),
        })
    }
}

impl RemoteCheckpoints {
    fn stage(&self, blobs: Vec<Blob>) -> Result<(), String> {
        let _: serde_json::Value = self.call(
            method::CHECKPOINT_STAGE,
            CheckpointStageParams {
                session: self.session.clone(),
                blobs,
            },
        )?;
        Ok(())
    }
}
