//! Project instructions and the environment block (DESIGN.md "prompt assembly": the head
//! of the prompt).
//!
//! [`Instructions`] is one session's view of its instruction files (`[agent]
//! instruction_files`, `AGENTS.md` by default): the user's global file
//! (`$XDG_CONFIG_HOME/amber/AGENTS.md`), then one per directory from the workspace's git
//! root (or the workspace outside a repository) down to the workspace, nearest last.
//!
//! **Invariants:** [`Instructions::refresh`] only `stat`s when nothing changed — files are
//! read again only when a stamp (size, mtime, inode) or the set of files changed; the
//! rendered text holds at most `[agent] instructions_max_bytes` of file text, nearest
//! files kept first (the global file is the most general, so it is the first left out),
//! every cut marked; a file that cannot be read (permissions, invalid UTF-8, a symlink
//! resolving outside the workspace) is a one-line note and a warning, never an error.

mod discover;
pub(crate) mod environment;
mod render;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub(crate) use discover::check_name;
use discover::{Candidate, Stamp};

/// `[agent] instruction_files` by default.
pub const DEFAULT_FILE_NAMES: [&str; 1] = ["AGENTS.md"];
/// `[agent] instructions_max_bytes` by default.
pub const DEFAULT_MAX_BYTES: usize = 32 * 1024;

/// One session's instruction files and their rendered text.
#[derive(Debug)]
pub struct Instructions {
    candidates: Vec<Candidate>,
    /// Each candidate's stamp when the text was last built (`None`: not there).
    stamps: Vec<Option<Stamp>>,
    max_bytes: usize,
    text: String,
    loaded: bool,
}

impl Instructions {
    /// The instruction files of `workspace` named `file_names`, plus the user's global
    /// file (from `$XDG_CONFIG_HOME` / `$HOME`). Nothing is read until [`Self::refresh`].
    pub fn new(workspace: &Path, file_names: &[String], max_bytes: usize) -> Self {
        let config_dir = crate::dirs::user_config_dir(&crate::dirs::process_env);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let global = discover::global_file(config_dir.as_deref(), home.as_deref());
        Self::with_global(workspace, file_names, max_bytes, global)
    }

    fn with_global(
        workspace: &Path,
        file_names: &[String],
        max_bytes: usize,
        global: Option<Candidate>,
    ) -> Self {
        let candidates = discover::candidates(workspace, file_names, global);
        Self {
            stamps: vec![None; candidates.len()],
            candidates,
            max_bytes,
            text: String::new(),
            loaded: false,
        }
    }

    /// At the start of a turn: `stat`s every candidate and reads the files again only when
    /// a stamp changed. Returns whether the text changed.
    pub fn refresh(&mut self) -> bool {
        let stamps: Vec<Option<Stamp>> =
            self.candidates.iter().map(|c| Stamp::of(&c.path)).collect();
        if self.loaded && stamps == self.stamps {
            return false;
        }
        self.loaded = true;
        self.stamps = stamps;
        let files: Vec<render::Loaded> = self
            .candidates
            .iter()
            .zip(&self.stamps)
            .filter(|(_, stamp)| stamp.is_some())
            .filter_map(|(candidate, _)| render::load(candidate, self.max_bytes))
            .collect();
        let text = render::render(&files, self.max_bytes);
        let changed = text != self.text;
        self.text = text;
        changed
    }

    /// The instructions block (empty when there are no files).
    pub fn text(&self) -> &str {
        &self.text
    }
}
