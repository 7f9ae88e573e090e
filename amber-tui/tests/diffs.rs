//! Snapshot tests of the diffs tool cells draw: the daemon's
//! `tool_call_completed.diff` for an `edit` with two hunks, a `write` of a new file and an
//! `apply_patch` over two files with a delete; a long diff folded and expanded; and a running
//! `edit`, drawn from its arguments without line numbers.

use crate::common::{app_with, draw, ev, screen};
use amber_tui::app::Incoming;
use insta::assert_snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;
use serde_json::{Value, json};

/// A turn with one tool call, completed with `diff` when given (`completed` false: still
/// running).
fn call(name: &str, args: Value, completed: Option<Option<&str>>) -> Vec<Incoming> {
    let mut events = vec![
        ev(
            Some(1),
            json!({"type": "turn_started", "prompt": "change the files"}),
        ),
        ev(
            Some(2),
            json!({"type": "tool_call_started", "itemId": "i_1", "callId": "c_1", "name": name, "arguments": args}),
        ),
    ];
    if let Some(diff) = completed {
        let mut body = json!({"type": "tool_call_completed", "callId": "c_1", "status": "ok", "output": "done", "durationMs": 4});
        if let Some(diff) = diff {
            body["diff"] = json!(diff);
        }
        events.push(ev(Some(3), body));
    }
    events
}

const LIB_OLD: &str = "fn a() {\n    1\n}";

/// `src/lib.rs` of 58 lines, changed near the top and at the end.
const TWO_HUNKS: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -4,7 +4,7 @@\n use std::fmt;\n \n fn a() {\n-    1\n+    2\n }\n \n fn b() {\n@@ -56,3 +56,5 @@ impl Thing {\n \t\tself.n\n     }\n }\n+\n+fn d() {}\n";

#[test]
fn edit_with_two_hunks() {
    let args =
        json!({"path": "src/lib.rs", "old_string": LIB_OLD, "new_string": "fn a() {\n    2\n}"});
    let mut app = app_with(&call("edit", args, Some(Some(TWO_HUNKS))));
    let t = draw(&mut app, 80, 24);
    let s = t.backend().to_string();
    assert!(s.contains("src/lib.rs  +3 −1"), "{s}");
    // Colours: the sign and text of additions green, of removals red; numbers dim.
    let buf = t.backend().buffer();
    let row = |needle: &str| {
        (0..buf.area.height)
            .find(|&y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .contains(needle)
            })
            .unwrap_or_else(|| panic!("{needle:?} not on screen"))
    };
    let fg = |y: u16, sym: &str| {
        (0..buf.area.width)
            .find(|&x| buf[(x, y)].symbol() == sym)
            .map(|x| buf[(x, y)].fg)
    };
    assert_eq!(fg(row("7 -     1"), "-"), Some(Color::Red));
    assert_eq!(fg(row("7 +     2"), "+"), Some(Color::Green));
    assert_eq!(fg(row("7 +     2"), "7"), Some(Color::DarkGray));
    assert_snapshot!(s);
}

#[test]
fn write_of_a_new_file() {
    let content = "# Notes\n\n- first\n- second\n";
    let diff = "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1,4 @@\n+# Notes\n+\n+- first\n+- second\n";
    let args = json!({"path": "notes.md", "content": content});
    let mut app = app_with(&call("write", args, Some(Some(diff))));
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn apply_patch_over_two_files_with_a_delete() {
    let patch = "*** Begin Patch\n*** Update File: src/main.rs\n@@ fn main() {\n-    old();\n+    new();\n*** Delete File: src/old.rs\n*** End Patch\n";
    let diff = "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,5 +1,5 @@\n mod cli;\n \n fn main() {\n-    old();\n+    new();\n }\n--- a/src/old.rs\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-pub fn old() {\n-    println!(\"old\");\n-}\n";
    let mut app = app_with(&call(
        "apply_patch",
        json!({"patch": patch}),
        Some(Some(diff)),
    ));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("src/old.rs (deleted)  +0 −3"), "{s}");
    assert_snapshot!(s);
}

/// A new file of 40 lines, some longer than the screen.
fn long_write() -> Vec<Incoming> {
    let lines: Vec<String> = (1..=40)
        .map(|i| {
            if i % 10 == 0 {
                format!(
                    "// line {i}: {}",
                    "a long comment that does not fit ".repeat(3)
                )
            } else {
                format!("line {i}")
            }
        })
        .collect();
    let diff = format!(
        "--- /dev/null\n+++ b/long.txt\n@@ -0,0 +1,40 @@\n{}\n",
        lines
            .iter()
            .map(|l| format!("+{l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let args = json!({"path": "long.txt", "content": lines.join("\n")});
    call("write", args, Some(Some(&diff)))
}

#[test]
fn long_diff_collapsed() {
    let mut app = app_with(&long_write());
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("… 26 more lines (ctrl-o to expand)"), "{s}");
    assert_snapshot!(s);
}

#[test]
fn long_diff_expanded() {
    let mut app = app_with(&long_write());
    app.on_key(KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL));
    assert!(app.expanded);
    // Tall enough for the whole cell: every line, the long ones wrapped under the text.
    let s = screen(&mut app, 80, 56);
    assert!(!s.contains("more lines"), "{s}");
    assert_snapshot!(s);
}

#[test]
fn running_edit_from_its_arguments() {
    let old = "fn a() {\n    1\n}\n\nfn b() {\n    let x = 1;\n    x\n}";
    let new = "fn a() {\n    2\n}\n\nfn b() {\n    let x = 1;\n    x + 1\n}";
    let args = json!({"path": "src/lib.rs", "edits": [
        {"old_string": old, "new_string": new},
        {"old_string": "// end", "new_string": "// the end"},
    ]});
    let mut app = app_with(&call("edit", args, None));
    let s = screen(&mut app, 80, 24);
    // Relative to the strings: no line numbers.
    assert!(s.contains("│ -     1"), "{s}");
    assert_snapshot!(s);
}
