//! `tool_search`: MCP tools offered lazily. When a turn defers tools ([`arrange`]), the
//! model is sent every other tool whole and this one, whose description is a compact
//! index of the deferred tools (server, name, one line); a call loads the full schemas of
//! the tools it finds into the session ([`amber_tools::deferred::LoadedTools`]), and every
//! later request of the session offers them like any other tool.
//!
//! Deferral is decided per turn from `[mcp] tool_search` and the size of the deferrable
//! schemas, counted loaded or not, so the decision does not flip as tools get loaded.
//! Servers configured `lazy = true` start only when a search names them ([`LazyServers`]):
//! the index lists them by name, and a search that names one starts it, waits until it is
//! ready and searches its tools too.

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

/// MCP servers configured `lazy = true` that have not started: what `tool_search` starts.
pub(crate) trait LazyServers: Send + Sync {
    /// The lazy servers not started yet.
    fn waiting(&self) -> Vec<String>;
    /// Starts `name` and waits until it is ready (or failed): its tools.
    fn start<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<Arc<dyn Tool>>, String>>;
}

/// What decides a turn's deferral: `[mcp] tool_search`, its threshold, the lazy servers.
pub(crate) struct Deferral {
    pub mode: ToolSearchMode,
    pub min_tokens: u64,
    pub lazy: Option<Arc<dyn LazyServers>>,
}

/// Decides whether this turn defers its deferrable tools and, if it does (and any is not
/// loaded yet, or a lazy server waits), registers `tool_search` over them. Returns whether
/// the turn defers.
pub(crate) fn arrange(tools: &mut ToolRegistry, deferral: &Deferral, loaded: &LoadedTools) -> bool {
    let waiting_servers = deferral
        .lazy
        .as_ref()
        .map(|lazy| lazy.waiting())
        .unwrap_or_default();
    let (mode, min_tokens) = (deferral.mode, deferral.min_tokens);
    let deferrable: Vec<Arc<dyn Tool>> = tools
        .iter()
        .filter(|t| t.defer_group().is_some())
        .cloned()
        .collect();
    let defer = match mode {
        ToolSearchMode::Off => false,
        ToolSearchMode::On => !deferrable.is_empty() || !waiting_servers.is_empty(),
        // A lazy server starts only through a search.
        ToolSearchMode::Auto => {
            let specs: Vec<ToolSpec> = deferrable.iter().map(|t| spec_of(t.as_ref())).collect();
            crate::compaction::tools_tokens(&specs) > min_tokens || !waiting_servers.is_empty()
        }
    };
    if !defer {
        return false;
    }
    let waiting: Vec<Arc<dyn Tool>> = deferrable
        .into_iter()
        .filter(|t| !loaded.contains(t.name()))
        .collect();
    if !waiting.is_empty() || !waiting_servers.is_empty() {
        let lazy = deferral
            .lazy
            .clone()
            .filter(|_| !waiting_servers.is_empty());
        tools.register(Arc::new(ToolSearch::new(waiting, waiting_servers, lazy)));
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

/// The `tool_search` tool of one turn: the deferred tools it may load, and the lazy
/// servers it may start.
struct ToolSearch {
    deferred: Vec<Arc<dyn Tool>>,
    servers: Vec<String>,
    lazy: Option<Arc<dyn LazyServers>>,
    description: String,
}

impl ToolSearch {
    fn new(
        deferred: Vec<Arc<dyn Tool>>,
        servers: Vec<String>,
        lazy: Option<Arc<dyn LazyServers>>,
    ) -> Self {
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
        if !servers.is_empty() {
            description.push_str(&format!(
                "\n\nServers not started yet (a search that names one starts it and searches \
                 its tools): {}",
                servers.join(", ")
            ));
        }
        Self {
            deferred,
            servers,
            lazy,
            description,
        }
    }

    /// The lazy servers `query` names: by name among its words, or as the server of a
    /// `select:` name (`mcp__SERVER__TOOL`).
    fn named_servers(&self, query: &str) -> Vec<&str> {
        let lower = query.to_lowercase();
        self.servers
            .iter()
            .filter(|server| {
                let server = server.to_lowercase();
                lower
                    .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
                    .any(|word| word == server || word.starts_with(&format!("mcp__{server}__")))
            })
            .map(String::as_str)
            .collect()
    }

    /// The tools `query` names or matches among `pool`, best first, at most `limit`.
    fn find<'t>(pool: &'t [Arc<dyn Tool>], query: &str, limit: usize) -> Vec<&'t Arc<dyn Tool>> {
        if let Some(names) = query.trim().strip_prefix("select:") {
            let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
            return pool
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
        let mut scored: Vec<(usize, usize, &Arc<dyn Tool>)> = pool
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
            // Lazy servers the query names start now; their tools join the search.
            let mut pool = self.deferred.clone();
            let mut notes = String::new();
            if let Some(lazy) = &self.lazy {
                for server in self.named_servers(query) {
                    match lazy.start(server).await {
                        Ok(tools) => {
                            let known: Vec<String> =
                                pool.iter().map(|t| t.name().to_owned()).collect();
                            pool.extend(
                                tools
                                    .into_iter()
                                    .filter(|t| !known.iter().any(|k| k == t.name())),
                            );
                            notes.push_str(&format!("Started MCP server `{server}`.\n"));
                        }
                        Err(why) => notes
                            .push_str(&format!("MCP server `{server}` could not start: {why}\n")),
                    }
                }
            }
            let found = Self::find(&pool, query, limit);
            if found.is_empty() {
                return ToolOutcome::ok(format!(
                    "{notes}No deferred tool matches `{query}`. Try other keywords, or `select:` \
                     with names from this tool's description."
                ));
            }
            ctx.session
                .loaded_tools
                .load(found.iter().map(|t| t.name()));
            let mut out = format!(
                "{notes}Loaded {} tool(s); call them by name from your next step on:\n",
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

    fn deferral(mode: ToolSearchMode, min_tokens: u64) -> Deferral {
        Deferral {
            mode,
            min_tokens,
            lazy: None,
        }
    }

    /// Lazy servers that start at once with two tools each, counting the starts.
    #[derive(Default)]
    struct Lazy {
        started: std::sync::Mutex<Vec<String>>,
    }

    impl LazyServers for Lazy {
        fn waiting(&self) -> Vec<String> {
            let started = self.started.lock().unwrap();
            ["linear", "sentry"]
                .into_iter()
                .filter(|s| !started.iter().any(|x| x == s))
                .map(str::to_owned)
                .collect()
        }
        fn start<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<Arc<dyn Tool>>, String>> {
            Box::pin(async move {
                self.started.lock().unwrap().push(name.to_owned());
                let tools: Vec<Arc<dyn Tool>> = ["create_issue", "list_issues"]
                    .into_iter()
                    .map(|op| {
                        Arc::new(Fake {
                            name: format!("mcp__{name}__{op}"),
                            group: Some(name.to_owned()),
                            description: format!("{op} in {name}"),
                        }) as Arc<dyn Tool>
                    })
                    .collect();
                Ok(tools)
            })
        }
    }

    #[tokio::test]
    async fn a_search_naming_a_lazy_server_starts_it_and_loads_its_tools() {
        let lazy = Arc::new(Lazy::default());
        let mut tools = registry(0);
        let ctx = ToolContext::new("/tmp", "c1");
        let deferral = Deferral {
            mode: ToolSearchMode::Auto,
            min_tokens: u64::MAX,
            lazy: Some(lazy.clone()),
        };
        // Nothing deferrable yet, but a lazy server waits: the turn defers.
        assert!(arrange(&mut tools, &deferral, &ctx.session.loaded_tools));
        let search = tools.get(NAME).unwrap().clone();
        assert!(
            search.description().contains("Servers not started yet"),
            "{}",
            search.description()
        );
        assert!(search.description().contains("linear, sentry"));
        // A search that names no server starts none.
        let out = search.call(json!({"query": "create issue"}), &ctx).await;
        assert!(
            out.output.starts_with("No deferred tool matches"),
            "{}",
            out.output
        );
        assert!(lazy.started.lock().unwrap().is_empty());
        let out = search
            .call(
                json!({"query": "linear create issue", "max_results": 1}),
                &ctx,
            )
            .await;
        assert!(
            out.output.starts_with("Started MCP server `linear`."),
            "{}",
            out.output
        );
        assert!(
            out.output.contains("## mcp__linear__create_issue"),
            "{}",
            out.output
        );
        assert_eq!(*lazy.started.lock().unwrap(), ["linear"]);
        assert!(
            ctx.session
                .loaded_tools
                .contains("mcp__linear__create_issue")
        );
        // select: names a server through its tools' prefix.
        let out = search
            .call(json!({"query": "select:mcp__sentry__list_issues"}), &ctx)
            .await;
        assert!(
            out.output.contains("## mcp__sentry__list_issues"),
            "{}",
            out.output
        );
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
                arrange(&mut tools, &deferral(mode, threshold), &loaded),
                defers,
                "{mode:?} {threshold} {count}"
            );
            assert_eq!(tools.get(NAME).is_some(), defers, "{mode:?}");
        }
    }

    #[test]
    fn the_index_lists_each_deferred_tool_on_one_line() {
        let mut tools = registry(4);
        arrange(
            &mut tools,
            &deferral(ToolSearchMode::On, 0),
            &LoadedTools::default(),
        );
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
        arrange(
            &mut tools,
            &deferral(ToolSearchMode::On, 0),
            &ctx.session.loaded_tools,
        );
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
        arrange(
            &mut next,
            &deferral(ToolSearchMode::On, 0),
            &ctx.session.loaded_tools,
        );
        let index = next.get(NAME).unwrap().description().to_owned();
        assert!(!index.contains("mcp__jira__op_1 "), "{index}");
        assert!(index.contains("mcp__jira__op_5 "), "{index}");
    }
}
