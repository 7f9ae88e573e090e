//! An agent's tool allow-list: names or globs (`mcp__github__*`), matched against the
//! registered tools when a turn starts.
//!
//! **Invariant:** a tool the list does not admit is withheld from the turn's registry, so
//! the model is not offered it, and dispatch denies a call to it with the reason given
//! here (`ToolRegistry::withhold`) — the list limits what runs, not only what is shown.

use globset::{Glob, GlobSet, GlobSetBuilder};

use amber_tools::ToolRegistry;

/// A compiled allow-list.
#[derive(Debug, Clone)]
pub(crate) struct ToolFilter {
    patterns: Vec<String>,
    set: GlobSet,
}

impl ToolFilter {
    /// `Err` names the pattern that is not a valid glob.
    pub(crate) fn new(patterns: &[String]) -> Result<ToolFilter, String> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            if pattern.trim().is_empty() {
                return Err("a tool name is empty".into());
            }
            let glob = Glob::new(pattern).map_err(|e| format!("`{pattern}`: {e}"))?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| e.to_string())?;
        Ok(ToolFilter {
            patterns: patterns.to_vec(),
            set,
        })
    }

    /// A filter that admits nothing (a stored allow-list that no longer compiles).
    pub(crate) fn nothing() -> ToolFilter {
        ToolFilter {
            patterns: Vec::new(),
            set: GlobSet::empty(),
        }
    }

    pub(crate) fn allows(&self, tool: &str) -> bool {
        self.set.is_match(tool)
    }

    pub(crate) fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// `registry` less the tools this filter does not admit; each of those is withheld with
    /// a reason naming `agent` and what it allows.
    pub(crate) fn restrict(&self, mut registry: ToolRegistry, agent: &str) -> ToolRegistry {
        let refused: Vec<String> = registry
            .names()
            .into_iter()
            .filter(|name| !self.allows(name))
            .map(str::to_owned)
            .collect();
        let allowed = if self.patterns.is_empty() {
            "no tools".to_owned()
        } else {
            self.patterns.join(", ")
        };
        for name in refused {
            let reason = format!(
                "the agent `{agent}` may not use the tool `{name}`: its `tools` allow only {allowed}"
            );
            registry.withhold(&name, reason);
        }
        registry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(patterns: &[&str]) -> ToolFilter {
        ToolFilter::new(&patterns.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn names_and_globs() {
        let f = filter(&["read", "mcp__github__*"]);
        assert!(f.allows("read"));
        assert!(f.allows("mcp__github__create_issue"));
        assert!(!f.allows("mcp__gitlab__x"));
        assert!(!f.allows("readme"));
        assert!(!ToolFilter::nothing().allows("read"));
        assert!(
            ToolFilter::new(&["[".to_owned()])
                .unwrap_err()
                .contains('[')
        );
        assert!(ToolFilter::new(&[" ".to_owned()]).is_err());
    }

    #[test]
    fn restrict_withholds_what_the_list_does_not_name() {
        let registry = filter(&["read", "search"]).restrict(ToolRegistry::builtin(), "scout");
        assert_eq!(registry.names(), ["read", "search"]);
        let reason = registry.withheld("bash").unwrap();
        assert!(
            reason.contains("`scout`")
                && reason.contains("`bash`")
                && reason.contains("read, search"),
            "{reason}"
        );
        assert!(registry.withheld("read").is_none());
        assert!(registry.withheld("no_such_tool").is_none());
    }
}
