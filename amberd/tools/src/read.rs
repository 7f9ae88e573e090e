//! The `read` tool: a text file's lines, numbered, from a 1-based offset.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::Args;
use super::{Tool, ToolContext, ToolOutcome};

/// Lines shown when the call gives no `limit`.
pub(crate) const DEFAULT_LIMIT: usize = 2000;
/// Longer lines are cut to this many bytes (at a char boundary).
pub(crate) const MAX_LINE_BYTES: usize = 2000;
/// Bytes sniffed for NUL to detect binary files.
const SNIFF_BYTES: usize = 8192;
/// Entries listed when the path is a directory.
const MAX_DIR_ENTRIES: usize = 200;
/// Room kept under the output cap for the closing note.
const NOTE_RESERVE: usize = 200;

pub(crate) struct ReadTool;

impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        "Read a text file from the workspace. Lines come numbered (`     n\\tline`). \
         `offset` is the 1-based first line (default 1), `limit` the number of lines \
         (default 2000). Very long lines are cut; binary files are refused."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root or absolute inside it"},
                "offset": {"type": "integer", "minimum": 1, "description": "1-based line to start at"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return"}
            },
            "required": ["path"]
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
            match tokio::task::spawn_blocking(move || read_blocking(&request)).await {
                Ok(outcome) => outcome,
                Err(err) => ToolOutcome::error(format!("read failed: {err}")),
            }
        })
    }
}

struct Request {
    path: PathBuf,
    shown: String,
    offset: usize,
    limit: usize,
    max_bytes: usize,
}

fn parse(args: &Value, ctx: &ToolContext) -> Result<Request, ToolOutcome> {
    let args = Args::new("read", args)?;
    let input = args.string("path")?;
    let offset = args.opt_u64("offset")?.unwrap_or(1).max(1);
    let limit = match args.opt_u64("limit")? {
        Some(0) => {
            return Err(ToolOutcome::error(
                "invalid arguments for `read`: `limit` must be at least 1",
            ));
        }
        Some(n) => n,
        None => DEFAULT_LIMIT as u64,
    };
    let path = ctx.resolve(input)?;
    Ok(Request {
        shown: ctx.display(&path),
        path,
        offset: usize::try_from(offset).unwrap_or(usize::MAX),
        limit: usize::try_from(limit).unwrap_or(usize::MAX),
        max_bytes: ctx.limits.max_output_bytes,
    })
}

fn read_blocking(req: &Request) -> ToolOutcome {
    let shown = &req.shown;
    let meta = match std::fs::metadata(&req.path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return ToolOutcome::error(format!("file not found: `{shown}`"));
        }
        Err(err) => return ToolOutcome::error(format!("cannot read `{shown}`: {err}")),
    };
    if meta.is_dir() {
        return directory_error(&req.path, shown);
    }
    match read_lines(req, meta.len()) {
        Ok(outcome) => outcome,
        Err(err) => ToolOutcome::error(format!("cannot read `{shown}`: {err}")),
    }
}

fn read_lines(req: &Request, size: u64) -> io::Result<ToolOutcome> {
    let shown = &req.shown;
    let mut reader = BufReader::with_capacity(64 * 1024, File::open(&req.path)?);
    let head = reader.fill_buf()?;
    if head[..head.len().min(SNIFF_BYTES)].contains(&0) {
        return Ok(ToolOutcome::error(format!(
            "`{shown}` looks like a binary file ({size} bytes); read only shows text files"
        )));
    }
    let budget = req.max_bytes.saturating_sub(NOTE_RESERVE);
    let end = req.offset.saturating_add(req.limit);
    let mut out = String::new();
    let mut line = Vec::new();
    let mut line_no = 0usize;
    let mut last_shown = 0usize;
    let mut cut_by_size = false;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        line_no += 1;
        if line_no < req.offset {
            continue;
        }
        if line_no >= end || cut_by_size {
            // One line past the window is enough to know more follow.
            break;
        }
        let formatted = format_line(line_no, &line);
        if out.len() + formatted.len() > budget && last_shown > 0 {
            cut_by_size = true;
            break;
        }
        out.push_str(&formatted);
        last_shown = line_no;
    }
    if last_shown == 0 {
        if line_no == 0 {
            return Ok(ToolOutcome::ok(format!("(`{shown}` is empty)")));
        }
        return Ok(ToolOutcome::error(format!(
            "offset {} is past the end of `{shown}` ({line_no} lines)",
            req.offset
        )));
    }
    if cut_by_size {
        out.push_str(&format!(
            "… [output limit reached after line {last_shown}; continue with offset={}]\n",
            last_shown + 1
        ));
    } else if line_no > last_shown {
        out.push_str(&format!(
            "… [more lines follow; continue with offset={}]\n",
            last_shown + 1
        ));
    }
    Ok(ToolOutcome::ok(out))
}

/// `{n:>6}\t{line}\n`, the line without its terminator and cut if very long.
fn format_line(line_no: usize, raw: &[u8]) -> String {
    let mut raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let text = String::from_utf8_lossy(raw);
    if text.len() <= MAX_LINE_BYTES {
        return format!("{line_no:>6}\t{text}\n");
    }
    let cut = text.floor_char_boundary(MAX_LINE_BYTES);
    format!(
        "{line_no:>6}\t{}… [line cut: {} more bytes]\n",
        &text[..cut],
        text.len() - cut
    )
}

fn directory_error(path: &Path, shown: &str) -> ToolOutcome {
    let mut entries: Vec<String> = match std::fs::read_dir(path) {
        Ok(dir) => dir
            .filter_map(Result::ok)
            .map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                match entry.file_type() {
                    Ok(kind) if kind.is_dir() => format!("{name}/"),
                    _ => name,
                }
            })
            .collect(),
        Err(err) => {
            return ToolOutcome::error(format!("`{shown}` is a directory, not a file ({err})"));
        }
    };
    entries.sort();
    let total = entries.len();
    let mut out = format!("`{shown}` is a directory, not a file; it has {total} entries");
    if total > 0 {
        out.push_str(":\n");
        out.push_str(&entries[..total.min(MAX_DIR_ENTRIES)].join("\n"));
        if total > MAX_DIR_ENTRIES {
            out.push_str(&format!("\n… and {} more", total - MAX_DIR_ENTRIES));
        }
    }
    ToolOutcome::error(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolStatus;

    fn workspace() -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, ToolContext::new(root, "call_1"))
    }

    async fn read(ctx: &ToolContext, args: Value) -> ToolOutcome {
        ReadTool.call(args, ctx).await
    }

    #[tokio::test]
    async fn numbers_lines() {
        let (_dir, ctx) = workspace();
        std::fs::write(ctx.workspace.join("a.txt"), "one\ntwo\r\nthree").unwrap();
        let out = read(&ctx, json!({"path": "a.txt"})).await;
        assert_eq!(out.status, ToolStatus::Ok);
        assert_eq!(out.output, "     1\tone\n     2\ttwo\n     3\tthree\n");
    }

    #[tokio::test]
    async fn offset_and_limit() {
        let (_dir, ctx) = workspace();
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        std::fs::write(ctx.workspace.join("a.txt"), text).unwrap();
        let out = read(&ctx, json!({"path": "a.txt", "offset": 3, "limit": 2})).await;
        assert_eq!(out.status, ToolStatus::Ok);
        assert!(
            out.output.starts_with("     3\tl3\n     4\tl4\n"),
            "{}",
            out.output
        );
        assert!(out.output.contains("offset=5"), "{}", out.output);
        let out = read(&ctx, json!({"path": "a.txt", "offset": 9})).await;
        assert_eq!(out.output, "     9\tl9\n    10\tl10\n");
        let out = read(&ctx, json!({"path": "a.txt", "offset": 11})).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("past the end"), "{}", out.output);
    }

    #[tokio::test]
    async fn default_limit_is_2000_lines() {
        let (_dir, ctx) = workspace();
        let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        std::fs::write(ctx.workspace.join("a.txt"), text).unwrap();
        let mut ctx = ctx;
        ctx.limits.max_output_bytes = 1 << 20;
        let out = read(&ctx, json!({"path": "a.txt"})).await;
        assert!(out.output.contains("  2000\t2000\n"));
        assert!(!out.output.contains("\t2001\n"));
        assert!(out.output.contains("offset=2001"));
    }

    #[tokio::test]
    async fn stops_at_the_output_cap_on_a_line_boundary() {
        let (_dir, mut ctx) = workspace();
        ctx.limits.max_output_bytes = 1000;
        let text: String = (1..=500).map(|i| format!("line number {i}\n")).collect();
        std::fs::write(ctx.workspace.join("a.txt"), text).unwrap();
        let out = read(&ctx, json!({"path": "a.txt"})).await;
        assert!(out.output.len() <= 1000, "{}", out.output.len());
        assert!(
            out.output.contains("output limit reached"),
            "{}",
            out.output
        );
    }

    #[tokio::test]
    async fn long_lines_are_cut() {
        let (_dir, ctx) = workspace();
        std::fs::write(ctx.workspace.join("a.txt"), "é".repeat(3000)).unwrap();
        let out = read(&ctx, json!({"path": "a.txt"})).await;
        assert!(
            out.output.contains("[line cut: 4000 more bytes]"),
            "{}",
            out.output.len()
        );
    }

    #[tokio::test]
    async fn binary_files_are_refused() {
        let (_dir, ctx) = workspace();
        std::fs::write(
            ctx.workspace.join("b.bin"),
            [0x7f, b'E', b'L', b'F', 0, 1, 2],
        )
        .unwrap();
        let out = read(&ctx, json!({"path": "b.bin"})).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("binary"), "{}", out.output);
    }

    #[tokio::test]
    async fn directories_are_an_error_listing_entries() {
        let (_dir, ctx) = workspace();
        std::fs::create_dir_all(ctx.workspace.join("d/sub")).unwrap();
        std::fs::write(ctx.workspace.join("d/f.txt"), "x").unwrap();
        let out = read(&ctx, json!({"path": "d"})).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("is a directory"), "{}", out.output);
        assert!(out.output.contains("f.txt\nsub/"), "{}", out.output);
    }

    #[tokio::test]
    async fn missing_file_empty_file_and_bad_args() {
        let (_dir, ctx) = workspace();
        let out = read(&ctx, json!({"path": "nope.txt"})).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("not found"));
        std::fs::write(ctx.workspace.join("e"), "").unwrap();
        let out = read(&ctx, json!({"path": "e"})).await;
        assert_eq!(out.status, ToolStatus::Ok);
        assert!(out.output.contains("empty"));
        let out = read(&ctx, json!({"path": 3})).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("`path`"), "{}", out.output);
        let out = read(&ctx, json!({})).await;
        assert!(out.output.contains("missing required field `path`"));
        let out = read(&ctx, json!({"path": "a", "offset": "x"})).await;
        assert!(out.output.contains("`offset`"));
    }

    #[tokio::test]
    async fn confinement_applies() {
        let (_dir, ctx) = workspace();
        let out = read(&ctx, json!({"path": "../../etc/passwd"})).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(
            out.output.contains("outside the workspace"),
            "{}",
            out.output
        );
    }
}
