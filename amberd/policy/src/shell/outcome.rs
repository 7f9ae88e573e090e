//! What classification produces: [`ShellClass`], the [`Classification`] of a command, and
//! the accumulator the walker fills while it visits the script.

use std::path::PathBuf;

use super::render::{self, CommandLine};
use super::words::Word;

/// How dangerous a command is. Ordered by severity; a command takes its worst part.
///
/// `Unknown` ranks below `Destructive`: a part known to be destructive dominates a part
/// that is merely not understood (`sudo foo`, `curl … | sh` are destructive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ShellClass {
    /// Every part only reads (known-safe programs, no writing redirection).
    #[default]
    ReadOnly,
    /// Writes that stay inside the workspace, builds and tests, local git operations.
    Benign,
    /// Not understood: asks in `write` mode.
    Unknown,
    /// Deletes recursively, rewrites history, publishes, escalates, or writes outside the workspace.
    Destructive,
}

impl ShellClass {
    /// Lower-case name, for logs and approval prompts.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Benign => "benign",
            Self::Unknown => "unknown",
            Self::Destructive => "destructive",
        }
    }
}

impl std::fmt::Display for ShellClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A path a command reads, as far as the classifier can name it (the engine resolves
/// symlinks and judges outside and secret locations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadPath {
    /// Lexical absolute path (a relative one joined to the tracked working directory).
    Absolute(PathBuf),
    /// Below the user's home (`~/x`, `$HOME/x`): relative to the daemon's `$HOME`.
    Home(PathBuf),
    /// Cannot be named before it runs: a variable, a substitution, `~user`, an unknown
    /// working directory, paths from stdin.
    Unknown,
}

/// One read of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Read {
    pub(crate) path: ReadPath,
    /// Read recursively (`grep -r`, `rg`, `find`): a directory holding a secret location
    /// counts as reading it.
    pub(crate) recursive: bool,
    /// The program and the argument, for the reason shown (`cat: ../x`).
    pub(crate) shown: String,
}

/// The verdict on one bash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Classification {
    pub(crate) class: ShellClass,
    /// Human-readable: which part decided the class, and why.
    pub(crate) reason: String,
    /// Approval scopes, one per invoked program (`rm`, `git push`, `cargo publish`):
    /// deduplicated, in order of appearance. Transparent wrappers (`env`, `timeout`,
    /// `xargs`, `bash -c` …) add none; `sudo` adds `sudo`.
    pub(crate) scopes: Vec<String>,
    /// Some write (redirection target, path argument of a known writer, the working
    /// directory of a building tool) resolves outside the workspace.
    pub(crate) outside_workspace: bool,
    /// Some write lands on a protected path (`.amber/`, `.git/hooks`, `.git/config`).
    pub(crate) protected: bool,
    /// Every invoked program as a command line, wrappers and inner commands alike, for
    /// matching rules (`render`).
    pub(crate) commands: Vec<CommandLine>,
    /// Everything that runs was seen: parsed, no computed command name, no opaque part.
    /// When false, allow rules do not apply.
    pub(crate) complete: bool,
    /// Some write or delete target cannot be resolved (a variable, a substitution, an
    /// unknown working directory): it may land anywhere, so it is treated like an outside
    /// write — never granted, never covered by an allow rule.
    pub(crate) unresolved_write: bool,
    /// The lexical absolute paths of the writes that land inside the workspace (including
    /// working directories that building tools write into); the engine resolves their
    /// symlinks, which this pure module does not.
    pub(crate) writes: Vec<PathBuf>,
    /// What the command reads: operands and file options of read-only programs,
    /// `< file` redirections, the working directory of searches (`ls`, `rg PATTERN`).
    pub(crate) reads: Vec<Read>,
}

/// Running result: worst class so far with its reasons, scopes, outside flag.
#[derive(Default)]
pub(super) struct Acc {
    pub(super) class: ShellClass,
    pub(super) reasons: Vec<String>,
    pub(super) scopes: Vec<String>,
    pub(super) outside: bool,
    /// How many downloading programs (curl, wget) were invoked so far.
    pub(super) downloads: usize,
    pub(super) protected: bool,
    pub(super) commands: Vec<CommandLine>,
    pub(super) incomplete: bool,
    pub(super) unresolved: bool,
    pub(super) writes: Vec<PathBuf>,
    /// Scopes of read-only parts (`pwd` in `$(pwd)`), left out when others exist.
    pub(super) read_only_scopes: Vec<String>,
    pub(super) reads: Vec<Read>,
}

const MAX_REASONS: usize = 4;

impl Acc {
    pub(super) fn note(&mut self, class: ShellClass, reason: String) {
        if class > self.class {
            self.class = class;
            self.reasons.clear();
        }
        if class == self.class && !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }

    pub(super) fn command(&mut self, argv: &[Word], read_only: bool) {
        if let Some(line) = render::render(argv, read_only)
            && !self.commands.contains(&line)
        {
            self.commands.push(line);
        }
    }

    /// Something runs that the classifier cannot see.
    pub(super) fn opaque(&mut self, reason: String) {
        self.incomplete = true;
        self.note(ShellClass::Unknown, reason);
    }

    pub(super) fn scope(&mut self, scope: String) {
        if !self.scopes.contains(&scope) {
            self.scopes.push(scope);
        }
    }

    /// The scope of a read-only part: granted only when nothing else is.
    pub(super) fn read_only_scope(&mut self, scope: String) {
        if !self.read_only_scopes.contains(&scope) {
            self.read_only_scopes.push(scope);
        }
    }

    pub(super) fn finish(mut self) -> Classification {
        if self.scopes.is_empty() {
            self.scopes = std::mem::take(&mut self.read_only_scopes);
        }
        let mut reason = self
            .reasons
            .iter()
            .take(MAX_REASONS)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if self.reasons.len() > MAX_REASONS {
            reason.push_str("; …");
        }
        if reason.is_empty() {
            reason = "no commands".to_owned();
        }
        Classification {
            class: self.class,
            reason,
            scopes: self.scopes,
            outside_workspace: self.outside,
            protected: self.protected,
            commands: self.commands,
            complete: !self.incomplete,
            unresolved_write: self.unresolved,
            writes: self.writes,
            reads: self.reads,
        }
    }
}
