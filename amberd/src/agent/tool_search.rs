//! `tool_search`: MCP tools offered lazily. When a turn defers tools ([`arrange`]), the
//! model is sent every other tool whole and this one, whose description is a compact
//! index of the deferred tools (server, name, one line); a call loads the full schemas of
//! the tools it finds into the session ([`amber_tools::deferred::LoadedTools`]), and every
//! later request of the session offers them like any other tool.
//!
//! Deferral is decided per turn from `[mcp] tool_search` and the size of the deferrable
//! schemas, counted loaded or not, so the decision does not flip as tools get loaded.

use std::sync::Arc;

use amber_llm::ToolSpec;
use amber_tools::deferred::LoadedTools;
use amber_tools::{Tool, ToolContext, ToolOutcome, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::mcp::config::ToolSearchMode;

/// The tool's name.
pub(crate) const NAME: &str = "tool_search";

/// Most tools one search loads, and the default.
const MAX_RESULTS: usize = 20;
const DEFAULT_RESULTS: usize = 5;
/// Longest one-line description in the index.
const INDEX_LINE: usize = 100;

/// Decides whether this turn defers its deferrable tools and, if it does (and any is not
/// loaded yet), registers `tool_search` over them. Returns whether the turn defers.
pub(crate) fn arrange(
    tools: &mut ToolRegistry,
    mode: ToolSearchMode,
    min_tokens: u64,
    loaded: &LoadedTools,
) -> bool {
    let deferrable: Vec<Arc<dyn Tool>> = tools
        .iter()
        .filter(|t| t.defer_group().is_some())
        .cloned()
        .collect();
    let defer = match mode {
        ToolSearchMode::Off => false,
        ToolSearchMode::On => !deferrable.is_empty(),
        ToolSearchMode::Auto => {
            let specs: Vec<ToolSpec> = deferrable.iter().map(|t| spec_of(t.as_ref())).collect();
            crate::compaction::tools_tokens(&specs) > min_tokens
        }
    };
    if !defer {
        return false;
    }
    let waiting: Vec<Arc<dyn Tool>> = deferrable
        .into_iter()
        .filter(|t| !loaded.contains(t.name()))
        .collect();
    if !waiting.is_empty() {
        tools.register(Arc::new(ToolSearch::new(waiting)));
    }
    true
}

fn spec_of(tool: &dyn Tool) -> ToolSpec {
    ToolSpec {
        name: tool.name().to_owned(),
        description: tool.description().to_owned(),
        parameters: tool.input_schema(),
    }
}

/// The `tool_search` tool of one turn: the deferred tools it may load.
struct ToolSearch {
    deferred: Vec<Arc<dyn Tool>>,
    description: String,
}

impl ToolSearch {
    fn new(deferred: Vec<Arc<dyn Tool>>) -> Self {
        let mut description = String::from(
            "Load the full definitions of deferred tools so that you can call them. The tools \
             below exist, but their parameters are not shown until loaded. Search by keywords \
             (`query: \"create issue\"`) or load exact names (`query: \"select:NAME,NAME\"`); \
             loaded tools are offered with their parameters from your next step on, for the \
             rest of the session.\n\nDeferred tools (server: name — what it does):",
        );
        for tool in &deferred {
            let group = tool.defer_group().unwrap_or("");
            description.push_str(&format!(
                "\n{group}: {} — {}",
                tool.name(),
                one_line(tool.description())
            ));
        }
        Self {
            deferred,
            description,
        }
    }

    /// The tools `query` names or matches, best first, at most `limit`.
    fn find(&self, query: &str, limit: usize) -> Vec<&Arc<dyn Tool>> {
        if let Some(names) = query.trim().strip_prefix("select:") {
            let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
            return self
                .deferred
                .iter()
                .filter(|t| wanted.contains(&t.name()))
                .take(MAX_RESULTS)
                .collect();
        }
        let terms: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .map(str::to_lowercase)
            .collect();
        let mut scored: Vec<(usize, usize, &Arc<dyn Tool>)> = self
            .deferred
            .iter()
            .enumerate()
            .filter_map(|(at, tool)| {
                let name = tool.name().to_lowercase();
                let text = tool.description().to_lowercase();
                let group = tool.defer_group().unwrap_or("").to_lowercase();
                let score: usize = terms
                    .iter()
                    .map(|term| {
                        3 * usize::from(name.contains(term.as_str()))
                            + 2 * usize::from(group.contains(term.as_str()))
                            + usize::from(text.contains(term.as_str()))
                    })
                    .sum();
                (score > 0).then_some((score, at, tool))
            })
            .collect();
        // Best score first; ties in index order.
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(limit).map(|(_, _, t)| t).collect()
    }
}

/// The first line of `text`, cut at [`INDEX_LINE`] characters.
fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= INDEX_LINE {
        return line.to_owned();
    }
    let cut: String = line.chars().take(INDEX_LINE - 1).collect();
    format!("{}…", cut.trim_end())
}

impl Tool for ToolSearch {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Keywords to search the deferred tools' names and descriptions, or `select:` and exact names separated by commas"
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "description": "Most tools to load (default 5)"
                }
            },
            "required": ["query"]
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let Some(query) = args.get("query").and_then(Value::as_str) else {
                return ToolOutcome::error("`query` (a string) is required");
            };
            let limit =
                args.get("max_results")
                    .and_then(Value::as_u64)
                    .map_or(DEFAULT_RESULTS, |n| {
                        usize::try_from(n)
                            .unwrap_or(MAX_RESULTS)
                            .clamp(1, MAX_RESULTS)
                    });
            let found = self.find(query, limit);
            if found.is_empty() {
                return ToolOutcome::ok(format!(
                    "No deferred tool matches `{query}`. Try other keywords, or `select:` with \
                     names from this tool's description."
                ));
            }
            ctx.session
                .loaded_tools
                .load(found.iter().map(|t| t.name()));
            let mut out = format!(
                "Loaded {} tool(s); call them by name from your next step on:\n",
                found.len()
            );
            for tool in found {
                out.push_str(&format!(
                    "\n## {}\n{}\nParameters (JSON Schema): {}\n",
                    tool.name(),
                    tool.description(),
                    tool.input_schema()
                ));
            }
            ToolOutcome::ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        name: String,
        group: Option<String>,
        description: String,
    }

    impl Tool for Fake {
        fn name(&self) -> &str {
            &self.name
        }
        fn description(&self) -> &str {
            &self.description
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"x": {"type": "string",
                   "description": "a parameter with a long enough description to weigh"}}})
        }
        fn read_only(&self) -> bool {
            true
        }
        fn defer_group(&self) -> Option<&str> {
            self.group.as_deref()
        }
        fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
            Box::pin(async { ToolOutcome::ok("") })
        }
    }

    fn registry(mcp_tools: usize) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Fake {
            name: "read".into(),
            group: None,
            description: "Read a file".into(),
        }));
        for i in 0..mcp_tools {
            let server = if i % 2 == 0 { "github" } else { "jira" };
            registry.register(Arc::new(Fake {
                name: format!("mcp__{server}__op_{i}"),
                group: Some(server.into()),
                description: format!("Operation {i} of {server}: manage issue number {i}\nMore."),
            }));
        }
        registry
    }

    #[test]
    fn the_mode_and_the_threshold_decide_deferral() {
        let loaded = LoadedTools::default();
        // (mode, threshold, mcp tools, defers)
        let cases = [
            (ToolSearchMode::Off, 0, 50, false),
            (ToolSearchMode::On, u64::MAX, 1, true),
            (ToolSearchMode::On, 0, 0, false),
            (ToolSearchMode::Auto, 1_000_000, 50, false),
            (ToolSearchMode::Auto, 100, 50, true),
        ];
        for (mode, threshold, count, defers) in cases {
            let mut tools = registry(count);
            assert_eq!(
                arrange(&mut tools, mode, threshold, &loaded),
                defers,
                "{mode:?} {threshold} {count}"
            );
            assert_eq!(tools.get(NAME).is_some(), defers, "{mode:?}");
        }
    }

    #[test]
    fn the_index_lists_each_deferred_tool_on_one_line() {
        let mut tools = registry(4);
        arrange(&mut tools, ToolSearchMode::On, 0, &LoadedTools::default());
        let description = tools.get(NAME).unwrap().description().to_owned();
        assert!(
            description.contains(
                "\ngithub: mcp__github__op_0 — Operation 0 of github: manage issue number 0\n"
            ),
            "{description}"
        );
        assert!(
            !description.contains("More."),
            "one line each: {description}"
        );
        assert!(
            !description.contains("read —"),
            "only deferred tools: {description}"
        );
    }

    #[tokio::test]
    async fn a_search_loads_the_best_matches_and_select_loads_exact_names() {
        let mut tools = registry(6);
        let ctx = ToolContext::new("/tmp", "c1");
        arrange(&mut tools, ToolSearchMode::On, 0, &ctx.session.loaded_tools);
        let search = tools.get(NAME).unwrap().clone();
        let out = search
            .call(json!({"query": "jira issue", "max_results": 2}), &ctx)
            .await;
        assert!(out.output.contains("Loaded 2 tool(s)"), "{}", out.output);
        assert!(out.output.contains("## mcp__jira__op_1"), "{}", out.output);
        assert!(
            out.output.contains("\"x\""),
            "the schema is shown: {}",
            out.output
        );
        assert!(ctx.session.loaded_tools.contains("mcp__jira__op_1"));
        assert!(!ctx.session.loaded_tools.contains("mcp__github__op_0"));

        let out = search
            .call(json!({"query": "select:mcp__github__op_4, nope"}), &ctx)
            .await;
        assert!(out.output.contains("Loaded 1 tool(s)"), "{}", out.output);
        assert!(ctx.session.loaded_tools.contains("mcp__github__op_4"));

        let none = search.call(json!({"query": "kubernetes"}), &ctx).await;
        assert!(
            none.output.starts_with("No deferred tool matches"),
            "{}",
            none.output
        );
        let bad = search.call(json!({}), &ctx).await;
        assert_eq!(bad.status, amber_proto::ToolStatus::Error);

        // The next turn's index leaves out what is loaded; once all are, no tool_search.
        let mut next = registry(6);
        arrange(&mut next, ToolSearchMode::On, 0, &ctx.session.loaded_tools);
        let index = next.get(NAME).unwrap().description().to_owned();
        assert!(!index.contains("mcp__jira__op_1 "), "{index}");
        assert!(index.contains("mcp__jira__op_5 "), "{index}");
    }
}
