//! The `search` tool end to end on real temp trees: both modes, ignore rules,
//! binaries, globs, limits, argument errors, confinement and cancellation.

use std::time::{Duration, SystemTime};

use amber_proto::ToolStatus;
use serde_json::{Value, json};

use super::*;

fn workspace() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ToolContext::new(root, "call_1"))
}

fn put(ctx: &ToolContext, rel: &str, text: &[u8]) {
    let path = ctx.workspace.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
}

async fn search(tool: &SearchTool, ctx: &ToolContext, args: Value) -> ToolOutcome {
    tool.call(args, ctx).await
}

/// A small project: sources, a gitignored build dir, a hidden dir, a binary.
fn project() -> (tempfile::TempDir, ToolContext) {
    let (dir, ctx) = workspace();
    put(&ctx, ".gitignore", b"build/\n*.log\n");
    put(
        &ctx,
        "src/main.rs",
        b"fn main() {\n    let user_name = load_user_name();\n}\n",
    );
    put(
        &ctx,
        "src/lib.rs",
        b"pub fn load_user_name() -> String {\n    String::new()\n}\n",
    );
    put(
        &ctx,
        "web/app.ts",
        b"export function getUserName(): string { return loadUserName(); }\n",
    );
    put(&ctx, "build/out.rs", b"fn load_user_name() {}\n");
    put(&ctx, "debug.log", b"load_user_name failed\n");
    put(&ctx, ".hidden/secret.rs", b"fn load_user_name() {}\n");
    put(&ctx, "data.bin", b"load_user_name\0\x01\x02");
    put(
        &ctx,
        "docs/notes.md",
        b"On load the user sees a name; user name, load name.\n",
    );
    (dir, ctx)
}

#[tokio::test]
async fn grep_respects_gitignore_hidden_and_binary_files() {
    let (_dir, ctx) = project();
    let tool = SearchTool::new();
    let out = search(&tool, &ctx, json!({"pattern": "load_user_name"})).await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(
        out.output,
        "src/lib.rs:1:pub fn load_user_name() -> String {\n\
         src/main.rs:2:    let user_name = load_user_name();\n"
    );
}

#[tokio::test]
async fn grep_glob_and_path_filter_files() {
    let (_dir, ctx) = project();
    let tool = SearchTool::new();
    let out = search(
        &tool,
        &ctx,
        json!({"pattern": "(?i)user_?name", "glob": "*.ts"}),
    )
    .await;
    assert_eq!(out.output.lines().count(), 1, "{}", out.output);
    assert!(out.output.starts_with("web/app.ts:1:export function"));
    let out = search(&tool, &ctx, json!({"pattern": "fn", "glob": "src/**/*.rs"})).await;
    assert_eq!(out.output.lines().count(), 2, "{}", out.output);
    let out = search(
        &tool,
        &ctx,
        json!({"pattern": "fn", "path": "src", "glob": "main.*"}),
    )
    .await;
    assert_eq!(out.output, "src/main.rs:1:fn main() {\n");
    let out = search(
        &tool,
        &ctx,
        json!({"pattern": "String", "path": "src/lib.rs"}),
    )
    .await;
    assert_eq!(out.output.lines().count(), 2, "{}", out.output);
    let out = search(&tool, &ctx, json!({"pattern": "nope_nothing"})).await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(
        out.output
            .starts_with("no matches for `nope_nothing` in `.`"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn grep_limit_cuts_and_says_so() {
    let (_dir, ctx) = workspace();
    let text: String = (0..50).map(|i| format!("hit {i}\n")).collect();
    put(&ctx, "a.txt", text.as_bytes());
    let tool = SearchTool::new();
    let out = search(&tool, &ctx, json!({"pattern": "hit", "limit": 5})).await;
    assert_eq!(out.status, ToolStatus::Ok);
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines.len(), 6, "{}", out.output);
    assert_eq!(lines[0], "a.txt:1:hit 0");
    assert_eq!(
        lines[5],
        "[… more matches; narrow the pattern or raise limit]"
    );
    let out = search(&tool, &ctx, json!({"pattern": "hit"})).await;
    assert_eq!(
        out.output.lines().count(),
        50,
        "default limit 100 holds all"
    );
}

#[tokio::test]
async fn grep_output_stays_under_the_cap_and_long_lines_are_cut() {
    let (_dir, mut ctx) = workspace();
    ctx.limits.max_output_bytes = 2000;
    let text: String = (0..200).map(|i| format!("needle line {i}\n")).collect();
    put(&ctx, "a.txt", text.as_bytes());
    put(
        &ctx,
        "b.txt",
        format!("needle {}\n", "x".repeat(5000)).as_bytes(),
    );
    let tool = SearchTool::new();
    let out = search(&tool, &ctx, json!({"pattern": "needle", "limit": 1000})).await;
    assert!(out.output.len() <= 2000, "{}", out.output.len());
    assert!(out.output.contains("[… output cut after"), "{}", out.output);
    // A huge limit is bounded by what the output can hold (2000 / 8 lines).
    let more: String = (0..300).map(|i| format!("line {i}\n")).collect();
    put(&ctx, "c.txt", more.as_bytes());
    let out = search(
        &tool,
        &ctx,
        json!({"pattern": "line", "limit": 1_000_000_000u64}),
    )
    .await;
    assert!(out.output.len() <= 2000, "{}", out.output.len());
    assert!(out.output.contains("[… output cut after"), "{}", out.output);
    assert!(out.output.contains(" of 250+ matches;"), "{}", out.output);
    let out = search(&tool, &ctx, json!({"pattern": "needle", "path": "b.txt"})).await;
    assert!(out.output.contains("… [+"), "{}", out.output);
    assert!(out.output.len() < MAX_LINE_BYTES + 100);
}

#[tokio::test]
async fn argument_errors_name_the_field() {
    let (_dir, ctx) = project();
    let tool = SearchTool::new();
    let cases = [
        (json!({"pattern": "fn ("}), "invalid regex `fn (`"),
        (json!({}), "missing required field `pattern`"),
        (json!({"pattern": ""}), "`pattern`"),
        (json!({"pattern": "x", "mode": "fuzzy"}), "`mode`"),
        (json!({"pattern": "x", "limit": 0}), "`limit`"),
        (json!({"pattern": "x", "limit": "ten"}), "`limit`"),
        (json!({"pattern": "x", "glob": "src/[a-"}), "`glob`"),
        (
            json!({"pattern": "x", "path": "missing"}),
            "path not found: `missing`",
        ),
        (
            json!({"pattern": "x", "path": "../x"}),
            "outside the workspace",
        ),
        (
            json!({"pattern": "x", "path": "/etc"}),
            "outside the workspace",
        ),
        (
            json!({"pattern": "!!", "mode": "semantic"}),
            "no searchable words",
        ),
    ];
    for (args, needle) in cases {
        let out = search(&tool, &ctx, args.clone()).await;
        assert_eq!(out.status, ToolStatus::Error, "{args}: {}", out.output);
        assert!(out.output.contains(needle), "{args}: {}", out.output);
    }
}

#[tokio::test]
async fn semantic_camel_case_query_finds_snake_case_code() {
    let (_dir, ctx) = project();
    let tool = SearchTool::new();
    let out = search(
        &tool,
        &ctx,
        json!({"pattern": "loadUserName", "mode": "semantic"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    // The whole identifier outranks its scattered parts (docs/notes.md).
    let ranked: Vec<&str> = out
        .output
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('['))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(ranked.len(), 4, "{}", out.output);
    assert_eq!(ranked[3], "docs/notes.md:1", "{}", out.output);
    for hit in ["src/lib.rs:1", "src/main.rs:2", "web/app.ts:1"] {
        assert!(ranked[..3].contains(&hit), "{}", out.output);
    }
    assert!(
        out.output
            .contains("      1: pub fn load_user_name() -> String {"),
        "{}",
        out.output
    );
    assert!(
        !out.output.contains("build/") && !out.output.contains(".hidden"),
        "{}",
        out.output
    );
    assert!(
        !out.output.contains("debug.log") && !out.output.contains("data.bin"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .ends_with("[4 results; BM25 over 5 files, 4 chunks]\n"),
        "{}",
        out.output
    );
    let out = search(
        &tool,
        &ctx,
        json!({"pattern": "load_user_name", "mode": "semantic", "glob": "*.ts"}),
    )
    .await;
    assert!(out.output.starts_with("web/app.ts:1"), "{}", out.output);
    let out = search(
        &tool,
        &ctx,
        json!({"pattern": "zebra", "mode": "semantic", "path": "src"}),
    )
    .await;
    assert_eq!(
        out.output,
        "no results for `zebra` in `src` (2 files indexed)"
    );
}

#[tokio::test]
async fn semantic_refresh_sees_edits_and_deletions() {
    let (_dir, ctx) = workspace();
    put(&ctx, "a.rs", b"fn compute_total() {}\n");
    put(&ctx, "b.rs", b"fn render_widget() {}\n");
    let tool = SearchTool::new();
    let args = |q: &str| json!({"pattern": q, "mode": "semantic"});
    let out = search(&tool, &ctx, args("renderWidget")).await;
    assert!(out.output.starts_with("b.rs:1"), "{}", out.output);

    put(&ctx, "a.rs", b"// moved\nfn render_widget_fast() {}\n");
    let later = SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(ctx.workspace.join("a.rs"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    std::fs::remove_file(ctx.workspace.join("b.rs")).unwrap();
    let out = search(&tool, &ctx, args("renderWidget")).await;
    assert!(out.output.starts_with("a.rs:2"), "{}", out.output);
    assert!(!out.output.contains("b.rs"), "{}", out.output);
    let out = search(&tool, &ctx, args("computeTotal")).await;
    assert!(out.output.starts_with("no results"), "{}", out.output);
}

#[tokio::test]
async fn a_cancelled_turn_stops_the_search() {
    let (_dir, ctx) = workspace();
    for i in 0..200 {
        put(&ctx, &format!("d{}/f{i}.txt", i % 10), b"needle\n");
    }
    let tool = SearchTool::new();
    ctx.cancel.cancel();
    for mode in ["grep", "semantic"] {
        let out = search(&tool, &ctx, json!({"pattern": "needle", "mode": mode})).await;
        assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
        assert!(out.output.starts_with("[cancelled]"), "{}", out.output);
    }
}

#[tokio::test]
async fn cancelling_mid_search_returns_promptly() {
    let (_dir, ctx) = workspace();
    // Enough files that the walk is still running when the token fires.
    for i in 0..3000 {
        put(&ctx, &format!("d{}/f{i}.txt", i % 50), b"needle haystack\n");
    }
    let tool = SearchTool::new();
    let cancel = ctx.cancel.clone();
    let args = json!({"pattern": "needle", "mode": "semantic"});
    let (out, ()) = tokio::join!(search(&tool, &ctx, args), async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        cancel.cancel();
    });
    // Either it finished first or it says it was cancelled; never hangs.
    assert!(
        out.output.starts_with("[cancelled]") || out.output.contains("results; BM25"),
        "{}",
        out.output
    );
    // The shared index stays usable for the next (uncancelled) turn.
    let ctx2 = ToolContext::new(ctx.workspace.clone(), "call_2");
    let out = search(
        &tool,
        &ctx2,
        json!({"pattern": "haystack", "mode": "semantic", "limit": 3}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(
        out.output
            .ends_with("[3 results; BM25 over 3000 files, 3000 chunks]\n"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn is_registered_as_a_read_only_builtin() {
    let registry = crate::ToolRegistry::builtin();
    let tool = registry.get("search").expect("search is built in");
    assert!(tool.read_only());
    assert_eq!(tool.input_schema()["required"], json!(["pattern"]));
}

/// Hides `secrets/` from `search`, as a session's `secrets/**` deny rule would.
struct HideSecrets;

impl crate::session::DeniedPaths for HideSecrets {
    fn denied(&self, tool: &str, relative: &str) -> bool {
        tool == "search" && relative.starts_with("secrets/")
    }
}

#[tokio::test]
async fn files_hidden_by_deny_rules_never_show_in_either_mode() {
    let (_dir, mut ctx) = workspace();
    let session = crate::SessionTools::detached();
    session.set_denied_paths(std::sync::Arc::new(HideSecrets));
    ctx.session = std::sync::Arc::new(session);
    put(&ctx, "secrets/key.env", b"API_KEY=sk-live-123\n");
    put(&ctx, "src/config.rs", b"let key = \"API_KEY\";\n");
    let tool = SearchTool::new();
    for mode in ["grep", "semantic"] {
        let out = search(&tool, &ctx, json!({"pattern": "API_KEY", "mode": mode})).await;
        assert_eq!(out.status, ToolStatus::Ok, "{mode}: {}", out.output);
        assert!(
            out.output.contains("src/config.rs"),
            "{mode}: {}",
            out.output
        );
        assert!(!out.output.contains("sk-live"), "{mode}: {}", out.output);
        assert!(
            out.output.contains("hidden by deny rules"),
            "{mode}: {}",
            out.output
        );
    }
}
