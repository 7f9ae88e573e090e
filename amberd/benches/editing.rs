//! Criterion KPI of the editing tools (run by hand, never in CI): a 20-hunk `apply_patch`
//! against a 5,000-line file, in memory (`parse_patch` + `apply_hunks`, exact context and
//! the indentation fallback) and through the tool (confinement, read, atomic write, diff).
//!
//! ```sh
//! cargo bench -p amberd --bench editing
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use amber_tools::apply_patch::{ApplyPatchTool, FileOp, apply_hunks, parse_patch};
use amber_tools::{Tool, ToolContext};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;

const LINES: usize = 5_000;
const HUNKS: usize = 20;

/// A 5,000-line source file: functions of 10 lines each.
fn file() -> String {
    (0..LINES)
        .map(|i| match i % 10 {
            0 => format!("fn f{}() {{\n", i / 10),
            9 => "}\n".to_owned(),
            k => format!("    let v{k} = compute({i});\n"),
        })
        .collect()
}

/// A patch of 20 hunks spread over the file, each with 3 lines of context around one
/// changed line; `indent` re-indents the context (forcing the indentation fallback).
fn patch(indent: &str) -> String {
    let mut text = String::from("*** Begin Patch\n*** Update File: big.rs\n");
    for h in 0..HUNKS {
        let line = h * (LINES / HUNKS) + 5;
        text.push_str(&format!("@@ fn f{}() {{\n", line / 10));
        for i in line - 3..line {
            text.push_str(&format!(" {indent}    let v{} = compute({i});\n", i % 10));
        }
        text.push_str(&format!(
            "-{indent}    let v{} = compute({line});\n",
            line % 10
        ));
        text.push_str(&format!(
            "+{indent}    let v{} = compute({line} + 1);\n",
            line % 10
        ));
        for i in line + 1..line + 4 {
            text.push_str(&format!(" {indent}    let v{} = compute({i});\n", i % 10));
        }
    }
    text.push_str("*** End Patch\n");
    text
}

fn hunks_of(patch: &str) -> Vec<amber_tools::apply_patch::Hunk> {
    match parse_patch(patch).unwrap().files.remove(0) {
        FileOp::Update { hunks, .. } => hunks,
        other => panic!("{other:?}"),
    }
}

fn editing(c: &mut Criterion) {
    let content = file();
    let exact = patch("");
    let loose = patch("  ");
    assert!(
        apply_hunks(&content, &hunks_of(&exact))
            .unwrap()
            .notes
            .is_empty()
    );
    assert_eq!(
        apply_hunks(&content, &hunks_of(&loose))
            .unwrap()
            .notes
            .len(),
        HUNKS
    );

    let mut group = c.benchmark_group("apply_patch");
    group.bench_function("parse_20_hunks", |b| {
        b.iter(|| parse_patch(black_box(&exact)).unwrap())
    });
    let hunks = hunks_of(&exact);
    group.bench_function("apply_20_hunks_5000_lines", |b| {
        b.iter(|| apply_hunks(black_box(&content), black_box(&hunks)).unwrap())
    });
    let loose_hunks = hunks_of(&loose);
    group.bench_function("apply_20_hunks_5000_lines_indentation_fallback", |b| {
        b.iter(|| apply_hunks(black_box(&content), black_box(&loose_hunks)).unwrap())
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ctx = ToolContext::new(root.clone(), "bench");
    let args = json!({ "patch": exact });
    group.bench_function("tool_20_hunks_5000_lines_with_diff", |b| {
        b.iter_batched(
            || std::fs::write(root.join("big.rs"), &content).unwrap(),
            |()| {
                let out = runtime.block_on(ApplyPatchTool.call(args.clone(), &ctx));
                assert!(out.diff.is_some(), "{}", out.output);
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, editing);
criterion_main!(benches);
