//! `session/get` in pages: one page of a session's messages, the snapshot without its
//! history, or the whole history walked back page by page.
//!
//! The daemon never answers more than `max_message_bytes`; a long session comes back as its
//! newest messages with `hasMore`, and older pages follow with `beforeIndex` = the previous
//! page's `firstIndex`.

use amber_proto::methods as m;
use amber_proto::{SessionGetParams, SessionGetResult};

use crate::{Client, ClientError};

impl Client {
    /// One page: at most `limit` messages (all that fit without it) before `before_index`
    /// (the newest without it).
    pub async fn session_get_page(
        &self,
        session_id: &str,
        limit: Option<u32>,
        before_index: Option<u64>,
    ) -> Result<SessionGetResult, ClientError> {
        let params = SessionGetParams {
            session_id: session_id.to_owned(),
            messages_limit: limit,
            before_index,
        };
        self.request::<m::SessionGet>(&params).await
    }

    /// The session's info, pending approvals, todos and `lastSeq`, with only its newest
    /// message: for clients that rebuild the history from the events.
    pub async fn session_snapshot(
        &self,
        session_id: &str,
    ) -> Result<SessionGetResult, ClientError> {
        self.session_get_page(session_id, Some(1), None).await
    }

    /// Every message, oldest first, fetched page by page (string fields stay as the daemon
    /// elided them). The snapshot is the newest page's; the result has `firstIndex` 0 and no
    /// `hasMore`.
    pub async fn session_get_all(&self, session_id: &str) -> Result<SessionGetResult, ClientError> {
        let mut got = self.session_get_page(session_id, None, None).await?;
        let mut first = got.first_index;
        let mut more = got.has_more;
        while more {
            let page = self.session_get_page(session_id, None, Some(first)).await?;
            if page.messages.is_empty() || page.first_index >= first {
                return Err(ClientError::Protocol(format!(
                    "session/get returned no message before index {first}: one message does \
                     not fit in a response"
                )));
            }
            let len = page.messages.len() as u64;
            if page.first_index + len != first {
                return Err(ClientError::Protocol(format!(
                    "session/get's page {}..{} does not end at index {first}",
                    page.first_index,
                    page.first_index + len
                )));
            }
            let mut messages = page.messages;
            messages.append(&mut got.messages);
            got.messages = messages;
            first = page.first_index;
            more = page.has_more;
        }
        got.first_index = 0;
        got.has_more = false;
        Ok(got)
    }
}
