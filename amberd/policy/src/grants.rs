//! Session grants: what an `allow_session` answer lets run without asking again.
//!
//! Commands are granted by program scope (`rm`, `git push`) and only inside the workspace;
//! file tools by folder, which covers its subfolders; `fetch` by host (exactly that host,
//! no subdomain). Nothing grants a run without the OS sandbox (`escalation` says why). A
//! grant never outlives its session.

use std::collections::HashSet;

/// What one approval asked about, and what a grant of it covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A program (plus subcommand for multi-command programs) run by a command tool.
    Program { tool: String, program: String },
    /// A workspace-relative folder (`.` for the root) touched by a file tool.
    Folder { tool: String, folder: String },
    /// A host reached by `fetch`.
    Host { tool: String, host: String },
    /// Anything else: the tool as a whole.
    Tool { tool: String },
}

impl Scope {
    /// How clients see it in `approval_requested.scope`.
    pub fn describe(&self) -> String {
        match self {
            Scope::Program { tool, program } => format!("{tool}: {program}"),
            Scope::Folder { tool, folder } => format!("{tool}: {folder}/"),
            Scope::Host { host, .. } => format!("host:{host}"),
            Scope::Tool { tool } => tool.clone(),
        }
    }
}

/// The grants of one session.
#[derive(Debug, Default, Clone)]
pub struct Grants {
    granted: HashSet<Scope>,
}

impl Grants {
    pub fn grant(&mut self, scopes: &[Scope]) {
        self.granted.extend(scopes.iter().cloned());
    }

    /// True when every scope is covered (an empty list is never covered).
    pub(crate) fn covers(&self, scopes: &[Scope]) -> bool {
        !scopes.is_empty() && scopes.iter().all(|s| self.covers_one(s))
    }

    fn covers_one(&self, scope: &Scope) -> bool {
        if self.granted.contains(scope) {
            return true;
        }
        let Scope::Folder { tool, folder } = scope else {
            return false;
        };
        // A folder grant covers its subfolders.
        self.granted.iter().any(|g| match g {
            Scope::Folder {
                tool: granted_tool,
                folder: granted,
            } => granted_tool == tool && is_within(folder, granted),
            _ => false,
        })
    }
}

fn is_within(folder: &str, ancestor: &str) -> bool {
    ancestor == "."
        || folder == ancestor
        || folder
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(f: &str) -> Scope {
        Scope::Folder {
            tool: "write".into(),
            folder: f.into(),
        }
    }

    fn program(p: &str) -> Scope {
        Scope::Program {
            tool: "bash".into(),
            program: p.into(),
        }
    }

    #[test]
    fn program_grants_need_every_program_of_the_command() {
        let mut g = Grants::default();
        g.grant(&[program("rm")]);
        assert!(g.covers(&[program("rm")]));
        assert!(!g.covers(&[program("rm"), program("git push")]));
        assert!(!g.covers(&[]));
    }

    #[test]
    fn folder_grants_cover_subfolders_only() {
        let mut g = Grants::default();
        g.grant(&[folder("src")]);
        assert!(g.covers(&[folder("src")]));
        assert!(g.covers(&[folder("src/a/b")]));
        assert!(!g.covers(&[folder("src2")]));
        assert!(!g.covers(&[folder(".")]));
        g.grant(&[folder(".")]);
        assert!(g.covers(&[folder("docs")]));
    }
}
