//! Deferred tools: tools whose full schemas the model is not sent until it asks for them
//! (through `tool_search`), so that dozens of MCP servers do not fill the context with
//! schemas a task never uses.
//!
//! A tool says it may be deferred ([`Tool::defer_group`](crate::Tool::defer_group): the
//! MCP server it belongs to); the session remembers which deferred tools were loaded
//! ([`LoadedTools`], in [`SessionTools`](crate::SessionTools)), and [`offered_specs`]
//! leaves the others out of a request. A deferred tool stays in the registry: a call to
//! one by name is dispatched like any other.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use amber_proto::sync::Locked;

use crate::ToolRegistry;

/// The deferred tools a session has loaded, and a counter that moves with each load so a
/// running turn knows to rebuild its tool list.
#[derive(Debug, Default)]
pub struct LoadedTools {
    names: Mutex<BTreeSet<String>>,
    generation: AtomicU64,
}

impl LoadedTools {
    /// Marks `names` loaded; true when any was not before.
    pub fn load<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> bool {
        let mut set = self.names.locked();
        let mut added = false;
        for name in names {
            added |= set.insert(name.to_owned());
        }
        if added {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        added
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.locked().contains(name)
    }

    /// Moves whenever a tool is loaded.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

/// `(name, description, input schema)` of the tools a request offers: every tool when
/// `deferring` is off; else all but the deferrable ones not loaded yet.
pub fn offered_specs(
    tools: &ToolRegistry,
    deferring: bool,
    loaded: &LoadedTools,
) -> Vec<(String, String, serde_json::Value)> {
    tools
        .iter()
        .filter(|t| !deferring || t.defer_group().is_none() || loaded.contains(t.name()))
        .map(|t| {
            (
                t.name().to_owned(),
                t.description().to_owned(),
                t.input_schema(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Tool, ToolContext, ToolOutcome};
    use futures::future::BoxFuture;
    use std::sync::Arc;

    struct Named(&'static str, Option<&'static str>);

    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "d"
        }
        fn input_schema(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn read_only(&self) -> bool {
            true
        }
        fn defer_group(&self) -> Option<&str> {
            self.1
        }
        fn call<'a>(
            &'a self,
            _args: serde_json::Value,
            _ctx: &'a ToolContext,
        ) -> BoxFuture<'a, ToolOutcome> {
            Box::pin(async { ToolOutcome::ok("") })
        }
    }

    #[test]
    fn deferred_tools_are_offered_once_loaded_and_always_without_deferring() {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Named("read", None)));
        registry.register(Arc::new(Named("mcp__a__x", Some("a"))));
        registry.register(Arc::new(Named("mcp__a__y", Some("a"))));
        let loaded = LoadedTools::default();
        let names = |deferring| -> Vec<String> {
            offered_specs(&registry, deferring, &loaded)
                .into_iter()
                .map(|(n, _, _)| n)
                .collect()
        };
        assert_eq!(names(false), ["read", "mcp__a__x", "mcp__a__y"]);
        assert_eq!(names(true), ["read"]);
        let before = loaded.generation();
        assert!(loaded.load(["mcp__a__y"]));
        assert!(loaded.generation() > before);
        assert!(!loaded.load(["mcp__a__y"]), "a second load changes nothing");
        assert_eq!(names(true), ["read", "mcp__a__y"]);
    }
}
