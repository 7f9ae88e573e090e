//! A session as plugins see it: [`SessionShared`] is the [`SessionView`] handed to
//! commands, status segments and panels.

use std::path::Path;
use std::sync::Arc;

use amber_proto::{Message, Mode, SessionInfo, SessionState};

use super::SessionShared;
use crate::plugins::SessionView;
use amber_tools::SessionTools;

impl SessionView for SessionShared {
    fn id(&self) -> &str {
        &self.id
    }

    fn info(&self) -> SessionInfo {
        SessionShared::info(self)
    }

    fn mode(&self) -> Mode {
        SessionShared::mode(self)
    }

    fn set_mode(&self, mode: Mode) -> SessionInfo {
        SessionShared::set_mode(self, mode)
    }

    fn set_model(&self, model: Option<String>, provider: Option<String>) -> SessionInfo {
        SessionShared::set_model(self, model, provider)
    }

    fn state(&self) -> SessionState {
        SessionShared::state(self)
    }

    fn workspace(&self) -> &Path {
        &self.workspace
    }

    fn provider(&self) -> Option<String> {
        SessionShared::provider(self)
    }

    fn messages(&self) -> Arc<Vec<Message>> {
        SessionShared::messages(self)
    }

    fn tools(&self) -> &SessionTools {
        &self.tools
    }
}
