//! The head of the prompt: a system prompt followed by the session's head blocks — the
//! environment block, the project instructions and the skills summary — as one system
//! message, first in every request.
//!
//! [`PromptHead`] is one session's cache of those blocks. **The environment block is
//! computed once per session load; the instructions and the skills summary are re-checked
//! at the start of a turn (`refresh`), and the blocks' text is rebuilt only when one of
//! them changed**, so every request of a session carries a byte-identical head between
//! such changes. The main loop, its sub-agents and compaction all build their head here.

use amber_proto::sync::Locked;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::instructions::{Instructions, environment};
use crate::workspace_git::WorkspaceGit;

/// One session's head blocks.
pub(crate) struct PromptHead {
    workspace: PathBuf,
    data_dir: PathBuf,
    state: Mutex<State>,
}

struct State {
    /// `None` until the first refresh of this session load.
    environment: Option<String>,
    instructions: Instructions,
    skills: Option<String>,
    /// The blocks joined: what follows any system prompt.
    blocks: Arc<str>,
}

impl PromptHead {
    /// The head of a session in `workspace` (skills saved by compaction under `data_dir`);
    /// nothing is read or run until [`Self::refresh`].
    pub(crate) fn new(workspace: &Path, data_dir: &Path, instructions: Instructions) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            state: Mutex::new(State {
                environment: None,
                instructions,
                skills: None,
                blocks: Arc::from(""),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every writer leaves the state consistent between statements.
        self.state.locked()
    }

    /// Whether the environment block is set (computed, or given by the session's
    /// environment).
    pub(crate) fn has_environment(&self) -> bool {
        self.lock().environment.is_some()
    }

    /// Gives the environment block (a session whose tools run elsewhere describes that
    /// machine); the next refresh puts it in the head. Ignored once one is set.
    pub(crate) fn set_environment(&self, block: String) {
        let mut state = self.lock();
        if state.environment.is_none() {
            state.environment = Some(block);
            // The next refresh joins the blocks again (see `refresh`).
            state.blocks = Arc::from("");
        }
    }

    /// At the start of a turn (or a manual compaction): the environment block on the first
    /// call of this session load (its `git` calls run through `git`, sandboxed), then the
    /// instructions (`stat` only, unless they changed) and the skills summary.
    pub(crate) async fn refresh(&self, git: &WorkspaceGit) {
        let needs_environment = self.lock().environment.is_none();
        let computed = if needs_environment {
            Some(environment::environment_block(&self.workspace, git).await)
        } else {
            None
        };
        let skills = amber_tools::skills::summary_with_data_dir(
            &self.workspace,
            &self.data_dir,
            crate::dirs::user_skills_dir().as_deref(),
        );
        let mut state = self.lock();
        // A block given by `set_environment` waits to be joined.
        let mut changed = state.blocks.is_empty() && state.environment.is_some();
        if state.environment.is_none() {
            state.environment = computed;
            changed = true;
        }
        changed |= state.instructions.refresh();
        if state.skills != skills {
            state.skills = skills;
            changed = true;
        }
        if changed {
            let blocks = [
                state.environment.as_deref(),
                Some(state.instructions.text()),
                state.skills.as_deref(),
            ];
            let joined: Vec<&str> = blocks
                .into_iter()
                .flatten()
                .filter(|b| !b.is_empty())
                .collect();
            state.blocks = Arc::from(joined.join("\n\n"));
        }
    }

    /// The head for `system_prompt`: it, then the blocks as of the last refresh.
    pub(crate) fn head(&self, system_prompt: &str) -> String {
        let blocks = self.lock().blocks.clone();
        join(system_prompt, &blocks)
    }
}

/// `system_prompt`, a blank line, `blocks` (either may be empty).
pub(crate) fn join(system_prompt: &str, blocks: &str) -> String {
    match (system_prompt.is_empty(), blocks.is_empty()) {
        (_, true) => system_prompt.to_owned(),
        (true, false) => blocks.to_owned(),
        (false, false) => format!("{system_prompt}\n\n{blocks}"),
    }
}
