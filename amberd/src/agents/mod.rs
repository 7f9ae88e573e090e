//! Custom agents: markdown files whose front matter sets a session's description, model,
//! provider, mode, tool allow-list and iteration cap, and whose body is its system prompt
//! (`front_matter.rs`). `session/new {agent}`, `task {agent}` and `agent/list` use them.
//!
//! Sources, the first winning a name clash: `.amber/agents/NAME.md` in the workspace, then
//! the user's `$XDG_CONFIG_HOME/amber/agents/NAME.md` (else `~/.config/amber/agents/`), then
//! the bundled `plan` and `review` (`plan.md`, `review.md` beside this file).
//!
//! **Invariants:** a name resolves to the first source that has a file of that name, good or
//! bad — a broken workspace file is an error naming it, never a silent fall-back to the
//! user's or the bundled agent of the same name (and `agent/list` leaves that name out); a
//! workspace agent may not take a bundled agent's name (`plan`, `review`): such a file is
//! refused with an error saying so, never used in the bundled one's place; a workspace
//! agent file must resolve inside the workspace (symlinks confined as for `read`) and is
//! read as a pinned version (`crate::trust`): its [`Agent::pinned`] names the hash of the
//! bytes it was parsed from, which callers check is trusted before using it; files are
//! read when used, never cached, so an edit applies to the next session.

mod front_matter;
mod limits;
mod tools;
mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use amber_proto::{AgentInfo, AgentSource};

pub(crate) use front_matter::Definition;
pub(crate) use limits::AgentLimits;
pub(crate) use tools::ToolFilter;

/// Where agent files live inside a workspace.
const WORKSPACE_AGENTS: &str = ".amber/agents";
/// The bundled agents: name and file.
const BUNDLED: [(&str, &str); 2] = [
    ("plan", include_str!("plan.md")),
    ("review", include_str!("review.md")),
];
/// Larger agent files are refused: a system prompt, not a document.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Longest agent name.
const MAX_NAME_CHARS: usize = 64;

/// Why an agent cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AgentError {
    #[error(
        "invalid agent name `{0}`: an agent's name is its file name without `.md`: letters, \
         digits, `-` and `_`, starting with a letter or digit, at most 64 characters"
    )]
    InvalidName(String),
    #[error("unknown agent `{name}`; available: {known}")]
    Unknown { name: String, known: String },
    #[error(
        "agent `{name}` ({file}): a workspace agent may not take the name of the bundled agent \
         `{name}`; it is refused (rename the file to use it)"
    )]
    ShadowsBundled { name: String, file: String },
    #[error("agent `{name}` ({file}): {reason}")]
    Bad {
        name: String,
        file: String,
        reason: String,
    },
}

/// A parsed agent and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Agent {
    pub name: String,
    pub source: AgentSource,
    pub definition: Definition,
    /// A workspace agent's file version (path and hash): it needs trust before use.
    pub pinned: Option<Pinned>,
}

/// The version of a workspace agent's file an [`Agent`] was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pinned {
    /// The absolute path in the workspace (the key trust is remembered under).
    pub path: PathBuf,
    /// Workspace-relative (`.amber/agents/NAME.md`).
    pub relative: String,
    pub hash: String,
}

/// Whether `name` is a bundled agent's, which no workspace agent may take.
pub(crate) fn is_bundled(name: &str) -> bool {
    BUNDLED.iter().any(|(bundled, _)| *bundled == name)
}

impl Agent {
    pub(crate) fn info(&self) -> AgentInfo {
        AgentInfo {
            name: self.name.clone(),
            description: self.definition.description.clone(),
            source: self.source,
            untrusted: false,
        }
    }
}

/// The folders agents are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentDirs {
    /// The workspace root (its `.amber/agents/` is read); `None` lists no workspace agents.
    workspace: Option<PathBuf>,
    /// The user's agents folder.
    user: Option<PathBuf>,
}

impl AgentDirs {
    /// `workspace`'s agents, the user's (from the environment now) and the bundled ones.
    pub(crate) fn new(workspace: Option<&Path>) -> AgentDirs {
        AgentDirs {
            workspace: workspace.map(Path::to_path_buf),
            user: user_agents_dir(),
        }
    }

    #[cfg(test)]
    fn with(workspace: Option<&Path>, user: Option<&Path>) -> AgentDirs {
        AgentDirs {
            workspace: workspace.map(Path::to_path_buf),
            user: user.map(Path::to_path_buf),
        }
    }

    /// The file sources in precedence order.
    fn sources(&self) -> Vec<(AgentSource, PathBuf)> {
        let workspace = self
            .workspace
            .as_ref()
            .map(|w| (AgentSource::Workspace, w.join(WORKSPACE_AGENTS)));
        let user = self.user.clone().map(|u| (AgentSource::User, u));
        workspace.into_iter().chain(user).collect()
    }
}

/// `$XDG_CONFIG_HOME/amber/agents`, else `$HOME/.config/amber/agents`.
fn user_agents_dir() -> Option<PathBuf> {
    crate::dirs::user_config_dir(&crate::dirs::process_env).map(|dir| dir.join("agents"))
}

/// Whether `name` can name an agent (and so a file stem in an agents folder).
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.chars().count() <= MAX_NAME_CHARS
}

/// Agent `name`: the first source's file of that name, parsed.
pub(crate) fn find(dirs: &AgentDirs, name: &str) -> Result<Agent, AgentError> {
    if !valid_name(name) {
        return Err(AgentError::InvalidName(name.to_owned()));
    }
    for (source, dir) in dirs.sources() {
        let path = dir.join(format!("{name}.md"));
        if std::fs::symlink_metadata(&path).is_ok() {
            return load(dirs, name, source, &path);
        }
    }
    match BUNDLED.iter().find(|(bundled, _)| *bundled == name) {
        Some((_, text)) => parse_bundled(name, text),
        None => Err(AgentError::Unknown {
            name: name.to_owned(),
            known: list(dirs, &|_| true)
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Every usable agent, by name. A file that cannot be used is logged and its name left out;
/// a workspace agent whose version `trusted` does not accept is marked `untrusted`.
pub(crate) fn list(dirs: &AgentDirs, trusted: &dyn Fn(&Pinned) -> bool) -> Vec<AgentInfo> {
    let mut files: BTreeMap<String, (AgentSource, PathBuf)> = BTreeMap::new();
    for (source, dir) in dirs.sources() {
        for (name, path) in agent_files(&dir) {
            files.entry(name).or_insert((source, path));
        }
    }
    // `None`: the name's file is broken. It still shadows a bundled agent of that name,
    // whose use is that file's error.
    let mut agents: BTreeMap<String, Option<AgentInfo>> = BTreeMap::new();
    for (name, (source, path)) in files {
        let agent = load(dirs, &name, source, &path)
            .inspect_err(
                |err| tracing::warn!(target: "amberd::agents", %err, "ignoring an agent file"),
            )
            .ok();
        agents.insert(
            name,
            agent.map(|a| AgentInfo {
                untrusted: a.pinned.as_ref().is_some_and(|p| !trusted(p)),
                ..a.info()
            }),
        );
    }
    for (name, text) in BUNDLED {
        if agents.contains_key(name) {
            continue;
        }
        match parse_bundled(name, text) {
            Ok(agent) => {
                agents.insert(name.to_owned(), Some(agent.info()));
            }
            Err(err) => {
                tracing::error!(target: "amberd::agents", %err, "a bundled agent is broken")
            }
        }
    }
    agents.into_values().flatten().collect()
}

/// The `NAME.md` files of `dir` with valid names; other `.md` files are logged and skipped.
fn agent_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .filter_map(|path| {
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            if valid_name(&stem) {
                return Some((stem, path));
            }
            let err = AgentError::InvalidName(stem);
            tracing::warn!(target: "amberd::agents", file = %path.display(), %err, "ignoring an agent file");
            None
        })
        .collect();
    files.sort();
    files
}

/// Reads and parses one agent file; a workspace file must resolve inside the workspace.
fn load(
    dirs: &AgentDirs,
    name: &str,
    source: AgentSource,
    path: &Path,
) -> Result<Agent, AgentError> {
    let bad = |reason: String| AgentError::Bad {
        name: name.to_owned(),
        file: path.display().to_string(),
        reason,
    };
    if let (Some(root), AgentSource::Workspace) = (&dirs.workspace, source) {
        return load_workspace(root, name, path);
    }
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(bad(format!(
            "{} bytes, more than the {MAX_FILE_BYTES} an agent file may have",
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| bad("not valid UTF-8".into()))?;
    let definition = front_matter::parse(name, &text).map_err(bad)?;
    Ok(Agent {
        name: name.to_owned(),
        source,
        definition,
        pinned: None,
    })
}

/// Reads a workspace agent as a pinned version: confined to the workspace, parsed from the
/// bytes its hash was taken of; a bundled agent's name is refused.
fn load_workspace(root: &Path, name: &str, path: &Path) -> Result<Agent, AgentError> {
    let bad = |reason: String| AgentError::Bad {
        name: name.to_owned(),
        file: path.display().to_string(),
        reason,
    };
    if is_bundled(name) {
        return Err(AgentError::ShadowsBundled {
            name: name.to_owned(),
            file: path.display().to_string(),
        });
    }
    let relative = format!("{WORKSPACE_AGENTS}/{name}.md");
    let file = match crate::trust::read(root, crate::trust::ConfigKind::Agent, &relative) {
        Ok(Some(file)) => file,
        Ok(None) => return Err(bad("cannot read it: it is gone".into())),
        Err(crate::trust::TrustFileError::Outside { reason, .. }) => {
            return Err(bad(format!("not inside the workspace: {reason}")));
        }
        Err(crate::trust::TrustFileError::NotAFile { .. }) => {
            return Err(bad("not a regular file".into()));
        }
        Err(err) => return Err(bad(err.to_string())),
    };
    let text = file.utf8().ok_or_else(|| bad("not valid UTF-8".into()))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(format!(
            "{} bytes, more than the {MAX_FILE_BYTES} an agent file may have",
            text.len()
        )));
    }
    let definition = front_matter::parse(name, text).map_err(bad)?;
    Ok(Agent {
        name: name.to_owned(),
        source: AgentSource::Workspace,
        definition,
        pinned: Some(Pinned {
            path: file.path.clone(),
            relative,
            hash: file.hash.clone(),
        }),
    })
}

fn parse_bundled(name: &str, text: &str) -> Result<Agent, AgentError> {
    let definition = front_matter::parse(name, text).map_err(|reason| AgentError::Bad {
        name: name.to_owned(),
        file: "bundled".into(),
        reason,
    })?;
    Ok(Agent {
        name: name.to_owned(),
        source: AgentSource::Bundled,
        definition,
        pinned: None,
    })
}

#[cfg(test)]
mod tests;
