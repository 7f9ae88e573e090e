//! Unit tests of `apply_patch`: the parser (every header kind, leniency, bad input, only
//! `\n` and `\r\n` ending lines), the applier (multi-hunk, `@@` anchors, whitespace
//! fallbacks and their notes, End of File, line ends) and the tool (all or nothing,
//! confinement, overwriting by Add File and Move to, statuses, diff).

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;

use amber_proto::ToolStatus;
use serde_json::json;

use super::*;

fn patch(body: &str) -> String {
    format!("*** Begin Patch\n{body}*** End Patch\n")
}

fn update(hunks: &str) -> Vec<Hunk> {
    match parse_patch(&patch(&format!("*** Update File: f\n{hunks}")))
        .unwrap()
        .files
        .remove(0)
    {
        FileOp::Update { hunks, .. } => hunks,
        other => panic!("{other:?}"),
    }
}

fn apply(content: &str, hunks: &str) -> Result<Applied, HunkError> {
    apply_hunks(content, &update(hunks))
}

// --- parse -------------------------------------------------------------------------------

#[test]
fn every_header_kind_parses() {
    let text = patch(
        "*** Add File: src/new.rs\n+fn a() {}\n+\n+// end\n\
         *** Delete File: old.txt\n\
         *** Update File: src/lib.rs\n*** Move to: src/core.rs\n@@ fn main() {\n-    old();\n+    new();\n \n*** End of File\n",
    );
    let parsed = parse_patch(&text).unwrap();
    assert_eq!(
        parsed.files,
        [
            FileOp::Add {
                path: "src/new.rs".into(),
                lines: vec!["fn a() {}".into(), String::new(), "// end".into()],
            },
            FileOp::Delete {
                path: "old.txt".into()
            },
            FileOp::Update {
                path: "src/lib.rs".into(),
                move_to: Some("src/core.rs".into()),
                hunks: vec![Hunk {
                    anchor: Some("fn main() {".into()),
                    lines: vec![
                        HunkLine::Remove("    old();".into()),
                        HunkLine::Add("    new();".into()),
                        HunkLine::Context(String::new()),
                    ],
                    end_of_file: true,
                }],
            },
        ]
    );
}

#[test]
fn crlf_blank_lines_heredoc_and_a_missing_final_newline_are_tolerated() {
    let plain = parse_patch(&patch("*** Update File: a\n@@\n-x\n+y\n")).unwrap();
    let crlf = "\r\n\r\n*** Begin Patch\r\n*** Update File: a\r\n@@\r\n-x\r\n+y\r\n*** End Patch";
    assert_eq!(parse_patch(crlf).unwrap(), plain);
    let heredoc = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch\nEOF\n";
    assert_eq!(parse_patch(heredoc).unwrap(), plain);
    // Unified-diff line numbers after @@ are ignored; a first hunk may lack its @@.
    let numbered = patch("*** Update File: a\n@@ -3,1 +3,1 @@\n-x\n+y\n");
    assert_eq!(parse_patch(&numbered).unwrap(), plain);
    let bare = patch("*** Update File: a\n-x\n+y\n");
    assert_eq!(parse_patch(&bare).unwrap(), plain);
}

#[test]
fn several_hunks_split_at_each_at_at() {
    let hunks = update("@@ fn a\n-1\n+2\n@@\n x\n-3\n+4\n");
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[0].anchor.as_deref(), Some("fn a"));
    assert_eq!(hunks[1].anchor, None);
    assert_eq!(hunks[1].old_lines().collect::<Vec<_>>(), ["x", "3"]);
}

#[test]
fn bad_input_gets_messages_naming_the_line() {
    let cases = [
        ("", "the patch is empty"),
        (
            "*** Update File: a\n-x\n*** End Patch",
            "must start with `*** Begin Patch`",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n-x\n+y\n",
            "must end with `*** End Patch`",
        ),
        ("*** Begin Patch\n*** End Patch", "changes no file"),
        (
            "*** Begin Patch\nhello\n*** End Patch",
            "line 2: expected a file header",
        ),
        (
            "*** Begin Patch\n*** Add File: n\nno plus\n*** End Patch",
            "line 3: every line of an added file starts with `+`",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n-x\n?y\n*** End Patch",
            "line 5: a hunk line starts with",
        ),
        (
            "*** Begin Patch\n*** Move to: b\n*** End Patch",
            "line 2: `*** Move to:` must follow",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            "line 2: `*** Update File: a` has no hunk",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n x\n*** End Patch",
            "line 3: a hunk in `a` changes nothing",
        ),
    ];
    for (text, expected) in cases {
        let err = parse_patch(text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text:?}: {err}");
    }
}

#[test]
fn a_lone_carriage_return_is_not_a_line_end_in_a_patch() {
    let add = |lines: &[&str]| FileOp::Add {
        path: "a".into(),
        lines: lines.iter().map(|l| (*l).to_owned()).collect(),
    };
    let cases = [
        (patch("*** Add File: a\n+x\ry\n+z\n"), add(&["x\ry", "z"])),
        (
            "*** Begin Patch\r\n*** Add File: a\r\n+x\ry\r\n+\r\r\n*** End Patch\r\n".to_owned(),
            add(&["x\ry", "\r"]),
        ),
        (
            patch("*** Update File: a\n@@ fn\rx\n k\rl\n-p\rq\n+r\rs\n"),
            FileOp::Update {
                path: "a".into(),
                move_to: None,
                hunks: vec![Hunk {
                    anchor: Some("fn\rx".into()),
                    lines: vec![
                        HunkLine::Context("k\rl".into()),
                        HunkLine::Remove("p\rq".into()),
                        HunkLine::Add("r\rs".into()),
                    ],
                    end_of_file: false,
                }],
            },
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_patch(&text).unwrap().files, [expected], "{text:?}");
    }
    // Lines ended by a lone CR are one line: no `*** Begin Patch` line of its own.
    let err = parse_patch("*** Begin Patch\r*** Add File: a\r+x\r*** End Patch\r")
        .unwrap_err()
        .to_string();
    assert!(err.contains("must start with `*** Begin Patch`"), "{err}");
}

#[test]
fn blank_lines_between_sections_are_not_content() {
    let parsed = parse_patch(&patch("*** Add File: n\n+a\n\n*** Delete File: d\n")).unwrap();
    assert_eq!(
        parsed.files[0],
        FileOp::Add {
            path: "n".into(),
            lines: vec!["a".into()]
        }
    );
}

// --- apply -------------------------------------------------------------------------------

const FILE: &str = "fn a() {\n    one();\n}\n\nfn b() {\n    one();\n}\n";

#[test]
fn several_hunks_apply_in_order() {
    let done = apply(
        "1\n2\n3\n4\n5\n6\n7\n",
        "@@\n 1\n-2\n+two\n 3\n@@\n 5\n-6\n+six\n+six!\n 7\n",
    )
    .unwrap();
    assert_eq!(done.text, "1\ntwo\n3\n4\n5\nsix\nsix!\n7\n");
    assert!(done.notes.is_empty());
}

#[test]
fn an_at_at_anchor_picks_the_right_one_of_two_identical_regions() {
    let done = apply(FILE, "@@ fn b() {\n-    one();\n+    two();\n").unwrap();
    assert_eq!(
        done.text,
        "fn a() {\n    one();\n}\n\nfn b() {\n    two();\n}\n"
    );
    let err = apply(FILE, "@@ fn c() {\n-    one();\n+    two();\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hunk 1 (@@ fn c() {)") && err.contains("`fn c() {` was not found"),
        "{err}"
    );
}

#[test]
fn trailing_whitespace_then_indentation_are_tolerated_with_notes() {
    let done = apply("a  \nb\t\nc\n", "@@\n a\n-b\n+B\n").unwrap();
    assert_eq!(
        done.text, "a  \nB\nc\n",
        "context keeps the file's own text"
    );
    assert_eq!(
        done.notes,
        ["hunk 1 (@@) matched ignoring trailing whitespace"]
    );
    let done = apply(
        "\tif x {\n\t\ty();\n\t}\n",
        "@@\n if x {\n-    y();\n+    z();\n+    w();\n",
    )
    .unwrap();
    assert_eq!(done.text, "\tif x {\n\t\tz();\n\t\tw();\n\t}\n");
    assert_eq!(
        done.notes,
        ["hunk 1 (@@) matched ignoring indentation; its added lines were re-indented to match"]
    );
}

#[test]
fn end_of_file_hunks_match_only_at_the_end() {
    let content = "x\nend\nx\nend\n";
    let done = apply(content, "@@\n x\n-end\n+END\n*** End of File\n").unwrap();
    assert_eq!(done.text, "x\nend\nx\nEND\n");
    let err = apply("end\nmore\n", "@@\n-end\n+END\n*** End of File\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("at the end of the file"), "{err}");
}

#[test]
fn pure_additions_go_after_the_anchor_or_at_the_end() {
    assert_eq!(
        apply("a\nb\n", "@@ a\n+inserted\n").unwrap().text,
        "a\ninserted\nb\n"
    );
    assert_eq!(apply("a\nb\n", "@@\n+last\n").unwrap().text, "a\nb\nlast\n");
}

#[test]
fn line_ends_and_a_missing_final_newline_are_kept() {
    let done = apply("a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n+B2\n").unwrap();
    assert_eq!(done.text, "a\r\nB\r\nB2\r\nc\r\n");
    let done = apply("a\nb", "@@\n a\n-b\n+c\n").unwrap();
    assert_eq!(done.text, "a\nc");
    let done = apply("a\nb", "@@\n a\n b\n+c\n").unwrap();
    assert_eq!(
        done.text, "a\nb\nc",
        "the line that was last gets a line end"
    );
}

#[test]
fn a_lone_carriage_return_in_a_file_is_part_of_its_line() {
    let cases = [
        ("x\ry\nz\n", "@@\n x\ry\n-z\n+Z\n", "x\ry\nZ\n"),
        ("x\ry\nz\n", "@@\n-x\ry\n+w\n", "w\nz\n"),
        ("a\rb\r\nc\r\n", "@@\n a\rb\n-c\n+C\n", "a\rb\r\nC\r\n"),
        // A last line ending in a lone CR has no line end: it stays as it is.
        ("a\nb\r", "@@\n-a\n+A\n", "A\nb\r"),
    ];
    for (content, hunks, expected) in cases {
        let done = apply(content, hunks).unwrap();
        assert_eq!(done.text, expected, "{content:?} with {hunks:?}");
    }
    // Exact matches: the lone CR is compared as a character, not stripped as a line end.
    assert!(
        apply("x\ry\nz\n", "@@\n x\ry\n-z\n+Z\n")
            .unwrap()
            .notes
            .is_empty()
    );
    let err = apply("x\ry\n", "@@\n-x\n+w\n").unwrap_err().to_string();
    assert!(err.contains("does not match"), "{err}");
}

#[test]
fn a_hunk_that_does_not_fit_names_itself_and_shows_the_closest_region() {
    let content: String = (1..=30).map(|i| format!("let v{i} = f({i});\n")).collect();
    let err = apply(
        &content,
        "@@\n-let v1 = f(1);\n+x\n@@ let v20 = f(20);\n-let v21 = g(21);\n+y\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("hunk 2 (@@ let v20 = f(20);) does not match"),
        "{err}"
    );
    assert!(
        err.contains("  let v21 = g(21);\n"),
        "what it looked for: {err}"
    );
    assert!(
        err.contains("closest region of the file is lines 21-21"),
        "{err}"
    );
    assert!(err.contains("    21\tlet v21 = f(21);"), "{err}");
}

#[test]
fn hunks_are_located_after_the_previous_one() {
    // The second hunk's context appears before the first hunk too: it must match after.
    let done = apply("k\nA\nk\nB\n", "@@\n-A\n+a\n@@\n k\n-B\n+b\n").unwrap();
    assert_eq!(done.text, "k\na\nk\nb\n");
}

// --- the tool ----------------------------------------------------------------------------

fn workspace() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    (dir, ToolContext::new(root, "call_1"))
}

async fn run(ctx: &ToolContext, body: &str) -> ToolOutcome {
    ApplyPatchTool
        .call(json!({ "patch": patch(body) }), ctx)
        .await
}

#[tokio::test]
async fn a_patch_adds_modifies_moves_and_deletes_and_reports_each_file() {
    let (_dir, ctx) = workspace();
    let ws = &ctx.workspace;
    fs::write(ws.join("lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    fs::write(ws.join("old.rs"), "keep\nme\n").unwrap();
    fs::write(ws.join("gone.txt"), "bye\n").unwrap();
    let out = run(
        &ctx,
        "*** Add File: src/new.rs\n+hello\n*** Update File: lib.rs\n@@\n-fn b() {}\n+fn b() { 1 }\n\
         *** Update File: old.rs\n*** Move to: src/moved.rs\n@@\n keep\n-me\n+you\n*** Delete File: gone.txt\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(
        out.output,
        "applied the patch: 4 files\nadded `src/new.rs`\nmodified `lib.rs`\nmoved `old.rs` -> `src/moved.rs`\ndeleted `gone.txt`"
    );
    assert_eq!(
        fs::read_to_string(ws.join("src/new.rs")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        fs::read_to_string(ws.join("lib.rs")).unwrap(),
        "fn a() {}\nfn b() { 1 }\n"
    );
    assert_eq!(
        fs::read_to_string(ws.join("src/moved.rs")).unwrap(),
        "keep\nyou\n"
    );
    assert!(!ws.join("old.rs").exists() && !ws.join("gone.txt").exists());
    let diff = out.diff.unwrap();
    for header in [
        "--- /dev/null\n+++ b/src/new.rs\n",
        "--- a/lib.rs\n+++ b/lib.rs\n@@ -1,2 +1,2 @@\n fn a() {}\n-fn b() {}\n+fn b() { 1 }\n",
        "--- a/old.rs\n+++ b/src/moved.rs\n",
        "--- a/gone.txt\n+++ /dev/null\n",
    ] {
        assert!(diff.contains(header), "{header} in {diff}");
    }
}

#[tokio::test]
async fn one_bad_hunk_leaves_every_file_untouched() {
    let (_dir, ctx) = workspace();
    let ws = &ctx.workspace;
    fs::write(ws.join("a.rs"), "a\n").unwrap();
    fs::write(ws.join("b.rs"), "b\n").unwrap();
    let out = run(
        &ctx,
        "*** Update File: a.rs\n@@\n-a\n+A\n*** Add File: c.rs\n+c\n*** Delete File: b.rs\n\
         *** Update File: b.rs\n@@\n-nope\n+x\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.output.contains("appears twice"), "{}", out.output);
    let out = run(
        &ctx,
        "*** Update File: a.rs\n@@\n-a\n+A\n*** Add File: c.rs\n+c\n*** Update File: b.rs\n@@ fn x\n-nope\n+x\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.output
            .starts_with("`b.rs`: hunk 1 (@@ fn x) does not match"),
        "{}",
        out.output
    );
    assert!(
        out.output.ends_with("Nothing was changed."),
        "{}",
        out.output
    );
    assert_eq!(out.diff, None);
    assert_eq!(fs::read_to_string(ws.join("a.rs")).unwrap(), "a\n");
    assert!(!ws.join("c.rs").exists());
}

#[tokio::test]
async fn paths_are_confined_and_missing_files_are_not_deleted() {
    let (_dir, ctx) = workspace();
    fs::write(ctx.workspace.join("here.txt"), "x\n").unwrap();
    let out = run(&ctx, "*** Add File: ../escape.txt\n+x\n").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.output.contains("`../escape.txt`") && out.output.contains("outside the workspace"),
        "{}",
        out.output
    );
    let out = run(
        &ctx,
        "*** Update File: here.txt\n*** Move to: /tmp/amber-escape.txt\n@@\n-x\n+y\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
    assert_eq!(
        fs::read_to_string(ctx.workspace.join("here.txt")).unwrap(),
        "x\n"
    );
    let out = run(&ctx, "*** Delete File: missing.txt\n").await;
    assert!(out.output.contains("does not exist"), "{}", out.output);
    let out = ApplyPatchTool
        .call(json!({ "patch": "nonsense" }), &ctx)
        .await;
    assert!(
        out.output
            .starts_with("invalid patch: the patch must start with"),
        "{}",
        out.output
    );
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn an_added_file_or_a_move_overwrites_an_existing_file() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, ctx) = workspace();
    let ws = &ctx.workspace;
    fs::write(ws.join("here.txt"), "old\n").unwrap();
    fs::set_permissions(ws.join("here.txt"), fs::Permissions::from_mode(0o751)).unwrap();
    fs::write(ws.join("a.rs"), "a\n").unwrap();
    fs::write(ws.join("b.rs"), "b-old\n").unwrap();
    let out = run(
        &ctx,
        "*** Add File: here.txt\n+new\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-a\n+A\n\
         *** Add File: fresh.txt\n+f\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(
        out.output,
        "applied the patch: 3 files\noverwrote `here.txt`\nmoved `a.rs` -> `b.rs` (overwrote `b.rs`)\nadded `fresh.txt`"
    );
    assert_eq!(fs::read_to_string(ws.join("here.txt")).unwrap(), "new\n");
    let mode = fs::metadata(ws.join("here.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o751, "an overwritten file keeps its mode");
    assert_eq!(fs::read_to_string(ws.join("b.rs")).unwrap(), "A\n");
    assert_eq!(
        names(ws),
        ["b.rs", "fresh.txt", "here.txt"],
        "the move's source is gone and nothing is left aside"
    );
    let diff = out.diff.unwrap();
    for part in [
        "--- a/here.txt\n+++ b/here.txt\n@@ -1 +1 @@\n-old\n+new\n",
        "--- a/b.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-b-old\n--- a/a.rs\n+++ b/b.rs\n@@ -1 +1 @@\n-a\n+A\n",
        "--- /dev/null\n+++ b/fresh.txt\n",
    ] {
        assert!(diff.contains(part), "{part:?} in {diff}");
    }
}

#[tokio::test]
async fn overwriting_stays_all_or_nothing() {
    let (_dir, ctx) = workspace();
    let ws = &ctx.workspace;
    fs::write(ws.join("here.txt"), "old\n").unwrap();
    fs::write(ws.join("a.rs"), "a\n").unwrap();
    fs::write(ws.join("b.rs"), "b-old\n").unwrap();
    fs::write(ws.join("c.rs"), "c\n").unwrap();
    let out = run(
        &ctx,
        "*** Add File: here.txt\n+new\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-a\n+A\n\
         *** Update File: c.rs\n@@\n-not c\n+x\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
    assert!(
        out.output.starts_with("`c.rs`: hunk 1 (@@) does not match"),
        "{}",
        out.output
    );
    for (name, content) in [
        ("here.txt", "old\n"),
        ("a.rs", "a\n"),
        ("b.rs", "b-old\n"),
        ("c.rs", "c\n"),
    ] {
        assert_eq!(
            fs::read_to_string(ws.join(name)).unwrap(),
            content,
            "{name}"
        );
    }
}

#[tokio::test]
async fn directories_special_files_and_links_out_are_never_overwritten() {
    let (_dir, ctx) = workspace();
    let ws = &ctx.workspace;
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "s\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), ws.join("out")).unwrap();
    fs::create_dir(ws.join("d")).unwrap();
    fs::write(ws.join("d/inside"), "i\n").unwrap();
    let fifo = std::ffi::CString::new(ws.join("fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    fs::write(ws.join("a.rs"), "a\n").unwrap();
    let cases = [
        (
            "*** Add File: d\n+x\n",
            "`d` is a directory; `*** Add File:` cannot replace it",
        ),
        (
            "*** Update File: a.rs\n*** Move to: d\n@@\n-a\n+A\n",
            "`d` is a directory; `*** Move to:` cannot replace it",
        ),
        (
            "*** Add File: fifo\n+x\n",
            "`fifo` is not a regular file; `*** Add File:` cannot replace it",
        ),
        (
            "*** Update File: a.rs\n*** Move to: fifo\n@@\n-a\n+A\n",
            "`fifo` is not a regular file; `*** Move to:` cannot replace it",
        ),
        ("*** Add File: out\n+x\n", "outside the workspace"),
        (
            "*** Update File: a.rs\n*** Move to: out\n@@\n-a\n+A\n",
            "outside the workspace",
        ),
    ];
    for (body, expected) in cases {
        let out = run(&ctx, body).await;
        assert_eq!(out.status, ToolStatus::Error, "{body}: {}", out.output);
        assert!(out.output.contains(expected), "{body}: {}", out.output);
    }
    assert_eq!(fs::read_to_string(ws.join("a.rs")).unwrap(), "a\n");
    assert_eq!(names(&ws.join("d")), ["inside"]);
    assert!(
        fs::symlink_metadata(ws.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(
        fs::read_to_string(outside.path().join("secret")).unwrap(),
        "s\n"
    );
    assert_eq!(names(ws), ["a.rs", "d", "fifo", "out"]);
}

#[tokio::test]
async fn an_added_file_through_a_link_inside_overwrites_the_target_and_keeps_the_link() {
    let (_dir, ctx) = workspace();
    let ws = &ctx.workspace;
    fs::write(ws.join("real.txt"), "old\n").unwrap();
    std::os::unix::fs::symlink("real.txt", ws.join("link.txt")).unwrap();
    let out = run(&ctx, "*** Add File: link.txt\n+new\n").await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(
        out.output,
        "applied the patch: 1 file\noverwrote `real.txt`"
    );
    assert_eq!(fs::read_to_string(ws.join("real.txt")).unwrap(), "new\n");
    assert!(
        fs::symlink_metadata(ws.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn a_lone_carriage_return_is_written_as_given() {
    let (_dir, ctx) = workspace();
    let ws = &ctx.workspace;
    fs::write(ws.join("crlf.txt"), "a\rb\r\nc\r\n").unwrap();
    let out = run(
        &ctx,
        "*** Add File: new.txt\n+x\ry\n+z\n*** Update File: crlf.txt\n@@\n a\rb\n-c\n+C\rD\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(fs::read(ws.join("new.txt")).unwrap(), b"x\ry\nz\n");
    assert_eq!(fs::read(ws.join("crlf.txt")).unwrap(), b"a\rb\r\nC\rD\r\n");
}

#[tokio::test]
async fn whitespace_notes_reach_the_result() {
    let (_dir, ctx) = workspace();
    fs::write(ctx.workspace.join("a.py"), "def f():\n\treturn 1\n").unwrap();
    let out = run(
        &ctx,
        "*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 2\n",
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(
        out.output
            .contains("note: `a.py`: hunk 1 (@@ def f():) matched ignoring indentation"),
        "{}",
        out.output
    );
    assert_eq!(
        fs::read_to_string(ctx.workspace.join("a.py")).unwrap(),
        "def f():\n\treturn 2\n"
    );
}

#[test]
fn written_paths_are_every_header_path() {
    let args = json!({"patch": patch("*** Update File: a\n*** Move to: b\n@@\n-x\n+y\n*** Add File: c\n+z\n")});
    assert_eq!(ApplyPatchTool.written_paths(&args), ["a", "b", "c"]);
}
