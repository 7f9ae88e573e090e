//! How a feature reaches other sessions of the daemon (a parent its background sub-agents,
//! a child its parent): a port the daemon installs in `Services` once it exists, since
//! features are built before the `SessionManager` that owns the sessions.
//!
//! **Invariant:** no method is called while a session is being loaded or made (from a
//! feature's `attach`, `prepare` or `started`): the manager loads under its lock.

use amber_proto::{SessionInfo, SessionNewParams, Usage};

use super::SessionError;
use super::inbox::Offer;
use crate::agent::delivery::Delivery;

/// Every session of the daemon, as features may use them.
pub(crate) trait Directory: Send + Sync {
    /// Makes a session (`session/new`).
    fn create(&self, params: SessionNewParams) -> Result<SessionInfo, SessionError>;
    /// Queues a prompt (`session/prompt`); its turn id.
    fn prompt(&self, id: &str, text: String) -> Result<String, SessionError>;
    /// A session's info, loaded or only stored.
    fn info(&self, id: &str) -> Result<SessionInfo, SessionError>;
    /// Every session's info.
    fn all(&self) -> Vec<SessionInfo>;
    /// The background sub-agents of session `parent`, or of every session.
    fn children(&self, parent: Option<&str>) -> Vec<SessionInfo>;
    /// What the background sub-agents of session `parent` have spent in all.
    fn children_usage(&self, parent: &str) -> Usage;
    /// The session an id, a name or an id prefix stands for.
    fn resolve(&self, id: &str) -> Result<String, SessionError>;
    /// Publishes an event outside any turn in the session (loading it).
    fn publish(&self, id: &str, kind: amber_proto::EventKind) -> Result<(), SessionError>;
    /// `watcher` gets a message when session `id` next goes idle.
    fn notify_when_idle(&self, id: &str, watcher: &str) -> Result<(), SessionError>;
    /// Cancels the session's running turn; whether one ran.
    fn cancel(&self, id: &str) -> Result<bool, SessionError>;
    /// Offers a result to the session's inbox (loading it).
    fn offer(&self, id: &str, delivery: Delivery) -> Result<Offer, SessionError>;
    /// Changes the session's info (loading it) and saves it; the info as changed.
    fn edit_info(
        &self,
        id: &str,
        edit: &mut dyn FnMut(&mut SessionInfo),
    ) -> Result<SessionInfo, SessionError>;
}
