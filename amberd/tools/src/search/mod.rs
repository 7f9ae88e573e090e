//! The `search` tool (read-only): `grep` mode — ripgrep's library crates
//! in-process, `path:line:text` — and `semantic` mode — a cached BM25 index
//! over code-aware tokens, ranked `path:line` results with a snippet.
//!
//! Both walk the confined `path` (default: the workspace) with the same
//! ignore rules and `glob` filter ([`walk`]), run in `spawn_blocking`, and
//! stop promptly when the turn is cancelled (a stop flag polled by the walker,
//! the searcher's sink and the indexer).

pub(crate) mod grep;
pub mod semantic;
pub mod walk;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::{ArgError, Args};
use super::{Tool, ToolContext, ToolOutcome};
use semantic::{Bm25Backend, SemanticBackend};
use walk::{GlobFilter, WalkSpec};

/// Matches shown when the call gives no `limit` (grep mode).
pub const DEFAULT_GREP_LIMIT: usize = 100;
/// Results shown when the call gives no `limit` (semantic mode).
pub const DEFAULT_SEMANTIC_LIMIT: usize = 20;
/// Semantic results are capped here whatever `limit` says.
pub const MAX_SEMANTIC_LIMIT: usize = 200;
/// Shown lines are cut to this many bytes (at a char boundary).
pub const MAX_LINE_BYTES: usize = 300;
/// The shortest possible grep output line (`p:1:x\n`, rounded up).
const MIN_LINE_BYTES: usize = 8;
/// Room kept under the output cap for the closing notes.
const NOTE_RESERVE: usize = 300;

const TOOL: &str = "search";

/// The `search` tool. One instance serves every session: the semantic
/// backend's index cache lives here.
pub struct SearchTool {
    semantic: Arc<dyn SemanticBackend>,
    threads: usize,
}

impl SearchTool {
    /// The tool with the BM25 backend, using the machine's cores.
    pub fn new() -> Self {
        let threads = walk::threads();
        Self {
            semantic: Arc::new(Bm25Backend::new(threads)),
            threads,
        }
    }

    /// The tool with another semantic backend.
    pub fn with_backend(semantic: Arc<dyn SemanticBackend>) -> Self {
        Self {
            semantic,
            threads: walk::threads(),
        }
    }
}

impl Default for SearchTool {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Grep,
    Semantic,
}

struct Request {
    pattern: String,
    mode: Mode,
    limit: usize,
    spec: WalkSpec,
    max_bytes: usize,
}

impl Tool for SearchTool {
    fn name(&self) -> &str {
        TOOL
    }

    fn description(&self) -> &str {
        "Search the workspace's files. `mode: \"grep\"` (default): `pattern` is a regular \
         expression (Rust regex syntax, case-sensitive; prefix `(?i)` to ignore case), matched \
         per line; results are `path:line:text`. `mode: \"semantic\"`: `pattern` is words or \
         identifiers (camelCase, snake_case and kebab-case are split, so any style finds the \
         others); results are ranked `path:line` with the best matching lines. Both skip \
         .gitignore'd, hidden and binary files. `path` limits the search to a directory or \
         file; `glob` filters files (`*.rs`, `src/**/*.ts`, `*.{js,ts}`); `limit` caps results \
         (grep 100, semantic 20)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "grep: a regex; semantic: words or identifiers"},
                "path": {"type": "string", "description": "Directory or file to search, relative to the workspace (default: the workspace)"},
                "glob": {"type": "string", "description": "Only files matching this glob, e.g. `*.rs` or `src/**/*.ts`"},
                "mode": {"type": "string", "enum": ["grep", "semantic"], "description": "grep (default) or semantic"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum matches (grep, default 100) or results (semantic, default 20)"}
            },
            "required": ["pattern"]
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn runs_in_workspace(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let request = match parse(&args, ctx) {
                Ok(request) => request,
                Err(outcome) => return outcome,
            };
            if ctx.cancel.is_cancelled() {
                return cancelled();
            }
            let stop = Arc::new(AtomicBool::new(false));
            let (semantic, threads, flag) =
                (Arc::clone(&self.semantic), self.threads, Arc::clone(&stop));
            let ctx_owned = ctx.clone();
            let job = tokio::task::spawn_blocking(move || {
                run(&request, semantic.as_ref(), threads, &flag, &ctx_owned)
            });
            tokio::select! {
                joined = job => match joined {
                    Ok(outcome) => outcome,
                    Err(err) => ToolOutcome::error(format!("search failed: {err}")),
                },
                () = ctx.cancel.cancelled() => {
                    // The walker, sink and indexer see the flag within an entry.
                    stop.store(true, Ordering::Relaxed);
                    cancelled()
                }
            }
        })
    }
}

fn cancelled() -> ToolOutcome {
    ToolOutcome::error("[cancelled] search stopped: the turn was cancelled")
}

fn invalid(field: &'static str, expected: &'static str, got: String) -> ToolOutcome {
    ArgError::WrongType {
        tool: TOOL.to_owned(),
        field,
        expected,
        got,
    }
    .into()
}

fn parse(args: &Value, ctx: &ToolContext) -> Result<Request, ToolOutcome> {
    let args = Args::new(TOOL, args)?;
    let pattern = args.string("pattern")?;
    if pattern.is_empty() {
        return Err(invalid("pattern", "a non-empty string", "\"\"".to_owned()));
    }
    let mode = match args.opt_string("mode")? {
        None | Some("grep") => Mode::Grep,
        Some("semantic") => Mode::Semantic,
        Some(other) => {
            return Err(invalid(
                "mode",
                "\"grep\" or \"semantic\"",
                format!("{other:?}"),
            ));
        }
    };
    let limit = match args.opt_u64("limit")? {
        Some(0) => return Err(invalid("limit", "at least 1", "0".to_owned())),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None if mode == Mode::Grep => DEFAULT_GREP_LIMIT,
        None => DEFAULT_SEMANTIC_LIMIT,
    };
    // Grep never collects more matches than the output could show (a line
    // takes at least `p:1:x\n`).
    let most = match mode {
        Mode::Grep => (ctx.limits.max_output_bytes / MIN_LINE_BYTES).max(1),
        Mode::Semantic => MAX_SEMANTIC_LIMIT,
    };
    let glob = match args.opt_string("glob")? {
        None => None,
        Some(g) if g.trim().is_empty() => None,
        Some(g) => Some(GlobFilter::new(g).map_err(|err| {
            ToolOutcome::error(format!(
                "invalid arguments for `{TOOL}`: field `glob` is not a valid glob ({g:?}): {err}"
            ))
        })?),
    };
    let root: PathBuf = match args.opt_string("path")? {
        None => ctx.workspace.clone(),
        Some(p) => ctx.resolve(p)?,
    };
    if !root.exists() {
        return Err(ToolOutcome::error(format!(
            "path not found: `{}`",
            ctx.display(&root)
        )));
    }
    Ok(Request {
        pattern: pattern.to_owned(),
        mode,
        limit: limit.min(most),
        spec: WalkSpec {
            workspace: ctx.workspace.clone(),
            root,
            glob,
        },
        max_bytes: ctx.limits.max_output_bytes,
    })
}

fn run(
    req: &Request,
    semantic: &dyn SemanticBackend,
    threads: usize,
    stop: &AtomicBool,
    ctx: &ToolContext,
) -> ToolOutcome {
    match req.mode {
        Mode::Grep => run_grep(req, threads, stop, ctx),
        Mode::Semantic => run_semantic(req, semantic, stop, ctx),
    }
}

fn run_grep(req: &Request, threads: usize, stop: &AtomicBool, ctx: &ToolContext) -> ToolOutcome {
    let matcher = match grep::matcher(&req.pattern) {
        Ok(m) => m,
        Err(err) => return ToolOutcome::error(format!("invalid regex `{}`: {err}", req.pattern)),
    };
    let hidden = |path: &std::path::Path| denied(ctx, path);
    let found = grep::grep_except(&req.spec, &matcher, req.limit, threads, stop, &hidden);
    if found.cancelled {
        return cancelled();
    }
    let shown_root = ctx.display(&req.spec.root);
    if found.matches.is_empty() {
        let mut out = format!("no matches for `{}` in `{shown_root}`", req.pattern);
        if let Some(glob) = &req.spec.glob {
            out.push_str(&format!(" (glob `{}`)", glob.pattern()));
        }
        return ToolOutcome::ok(out);
    }
    let budget = req.max_bytes.saturating_sub(NOTE_RESERVE);
    let mut out = String::new();
    let mut shown = 0usize;
    for m in &found.matches {
        let line = format!("{}:{}:{}\n", ctx.display(&m.path), m.line, m.text);
        if out.len() + line.len() > budget && shown > 0 {
            break;
        }
        out.push_str(&line);
        shown += 1;
    }
    if shown < found.matches.len() {
        let plus = if found.truncated { "+" } else { "" };
        out.push_str(&format!(
            "[… output cut after {shown} of {}{plus} matches; narrow the pattern, path or glob]\n",
            found.matches.len()
        ));
    } else if found.truncated {
        out.push_str("[… more matches; narrow the pattern or raise limit]\n");
    }
    if found.unreadable > 0 {
        out.push_str(&format!("[{} files could not be read]\n", found.unreadable));
    }
    if found.hidden > 0 {
        out.push_str(&hidden_note(found.hidden));
    }
    ToolOutcome::ok(out)
}

/// Whether a deny rule of the session hides `path` (a file the walk found) from search.
/// `read` deny rules count too: a match line shows the file's content.
fn denied(ctx: &ToolContext, path: &std::path::Path) -> bool {
    let relative = ctx.display(path);
    ["search", "read"]
        .iter()
        .any(|tool| ctx.session.path_denied(tool, &relative))
}

fn hidden_note(files: usize) -> String {
    format!("[{files} files hidden by deny rules were not searched]\n")
}

fn run_semantic(
    req: &Request,
    backend: &dyn SemanticBackend,
    stop: &AtomicBool,
    ctx: &ToolContext,
) -> ToolOutcome {
    let mut result = match backend.query(&req.spec, &req.pattern, req.limit, stop) {
        Ok(result) => result,
        Err(err) => return ToolOutcome::error(format!("semantic search: {err}")),
    };
    // The index is shared by every session, so deny rules apply to its results.
    let before = result.hits.len();
    result.hits.retain(|hit| !denied(ctx, &hit.path));
    let hidden = before - result.hits.len();
    if result.refresh.cancelled || stop.load(Ordering::Relaxed) {
        return cancelled();
    }
    let shown_root = ctx.display(&req.spec.root);
    if result.hits.is_empty() {
        return ToolOutcome::ok(format!(
            "no results for `{}` in `{shown_root}` ({} files indexed)",
            req.pattern, result.files
        ));
    }
    let budget = req.max_bytes.saturating_sub(NOTE_RESERVE);
    let mut out = String::new();
    let mut shown = 0usize;
    for hit in &result.hits {
        let (best, lines) = semantic::snippet(&hit.path, hit, &req.pattern);
        let mut block = format!(
            "{}:{best} (score {:.2})\n",
            ctx.display(&hit.path),
            hit.score
        );
        for (k, text) in lines {
            block.push_str(&format!("{k:>7}: {text}\n"));
        }
        if out.len() + block.len() > budget && shown > 0 {
            break;
        }
        out.push_str(&block);
        shown += 1;
    }
    out.push_str(&format!(
        "[{shown} results; BM25 over {} files, {} chunks]\n",
        result.files, result.docs
    ));
    if hidden > 0 {
        out.push_str(&format!(
            "[{hidden} results in files hidden by deny rules left out]\n"
        ));
    }
    ToolOutcome::ok(out)
}

/// A matched line as shown: terminator stripped, lossily decoded, cut to
/// [`MAX_LINE_BYTES`] at a char boundary.
pub(crate) fn cut_line(raw: &[u8]) -> String {
    let mut raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let text = String::from_utf8_lossy(raw);
    if text.len() <= MAX_LINE_BYTES {
        return text.into_owned();
    }
    let cut = text.floor_char_boundary(MAX_LINE_BYTES);
    format!("{}… [+{} bytes]", &text[..cut], text.len() - cut)
}
