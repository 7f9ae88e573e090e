//! Tests of [`super::StreamingMarkdown`]: the partial last line shown up to its open
//! constructs, equality with [`super::render`], O(tail) work per delta, and reflow on a
//! width change.
use super::chunk::Chunker;
use super::partial::shown_prefix;
use super::render::append_chunk;
use super::tests::{REPLY, dump};
use super::{StreamingMarkdown, render};

/// Documents exercising fences, lists, quotes, tables and chunk edge cases.
const DOCS: &[&str] = &[
    REPLY,
    "# T\n\npara **bold** and more\n\n```rust\nfn a() {}\n\n\nfn b() {}\n```\n\nend",
    "- a\n\n  cont\n\n- b\n\npara\n\n1. x\n2. y\n\n> q\n>\n> q2\n\n> other",
    "| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n---\n\n```\nunclosed\n\nfence",
    "no newline at all, just one long line with *emphasis*",
    "\n\n\nleading blanks\r\nand CRLF\r\n\r\nnext\r\n",
    "    indented\n\n    code\n\nafter\n\n<pre>\n\nhtml\n</pre>\n",
];

/// What a stream of `text` so far shows: its complete lines and the shown prefix of the
/// unterminated last one, as `render` would draw that much text.
fn expected_so_far(text: &str) -> &str {
    let committed = text.rfind('\n').map_or(0, |i| i + 1);
    let mut chunker = Chunker::default();
    let mut offset = 0;
    for line in text[..committed].split_inclusive('\n') {
        chunker.feed(line.trim_end_matches('\n'), offset);
        offset += line.len();
    }
    &text[..committed + shown_prefix(&text[committed..], chunker.in_fence())]
}

/// Pushes `doc` in pieces of `step` bytes (on char boundaries), checking after each push
/// that the complete lines and the safe part of the last one are shown; then finishes and
/// compares with `render`.
fn stream_and_check(doc: &str, step: usize, width: u16) {
    let mut md = StreamingMarkdown::new();
    let mut pos = 0;
    while pos < doc.len() {
        let mut end = (pos + step).min(doc.len());
        while !doc.is_char_boundary(end) {
            end += 1;
        }
        md.push(&doc[pos..end]);
        pos = end;
        let complete = expected_so_far(&doc[..pos]);
        assert_eq!(
            dump(md.lines(width)),
            dump(&render(complete, width)),
            "after {pos} bytes of {doc:?}"
        );
    }
    md.finish();
    assert_eq!(
        dump(md.lines(width)),
        dump(&render(doc, width)),
        "finished {doc:?}"
    );
    assert_eq!(md.lines(width), render(doc, width).as_slice());
}

#[test]
fn streaming_shows_what_renders_the_same_once_complete_and_matches_render() {
    for doc in DOCS {
        for step in [1, 3, 17, 1000] {
            stream_and_check(doc, step, 40);
        }
        stream_and_check(doc, 7, 13);
    }
}

#[test]
fn partial_markup_is_held_back() {
    let mut md = StreamingMarkdown::new();
    md.push("Some **bo");
    assert_eq!(dump(md.lines(40)), "Some\n");
    md.push("ld** text");
    assert_eq!(dump(md.lines(40)), "Some [b]bold[/] text\n");
    md.push("\nnext **ha");
    assert_eq!(dump(md.lines(40)), "Some [b]bold[/] text next\n");
    md.finish();
    assert_eq!(dump(md.lines(40)), "Some [b]bold[/] text next **ha\n");
}

#[test]
fn unclosed_fence_renders_as_code_while_streaming() {
    let mut md = StreamingMarkdown::new();
    md.push("```rust\nlet x = 1;\n\nlet y = **2**;\nlet z");
    assert_eq!(
        dump(md.lines(40)),
        "[d]─ rust ─[/]\n[cyan]let x = 1;[/]\n\n[cyan]let y = **2**;[/]\n[cyan]let z[/]\n"
    );
    // A line that may be the closing fence waits for its end.
    md.push(";\n``");
    assert!(!dump(md.lines(40)).contains("``"));
}

#[test]
fn push_after_many_blocks_renders_only_the_tail() {
    let mut md = StreamingMarkdown::new();
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&format!("Paragraph {i} with **some** text.\n\n"));
    }
    md.push(&text);
    md.lines(60);
    let first = md.take_rendered();
    assert_eq!(first.len(), 200, "each block rendered once");
    let tail_start = text.len();
    md.push("The tail block ");
    md.lines(60);
    let rendered = md.take_rendered();
    assert_eq!(
        rendered.last(),
        Some(&(tail_start..tail_start + "The tail block ".len())),
        "an incomplete line renders as the tail (after the block it closes): {rendered:?}"
    );
    assert!(rendered.len() <= 2, "{rendered:?}");
    md.push("grows\n");
    md.lines(60);
    let rendered = md.take_rendered();
    assert_eq!(
        rendered.len(),
        2,
        "the last paragraph closes, then the tail: {rendered:?}"
    );
    assert!(rendered[0].end == tail_start && rendered[1].start == tail_start);
    md.push("and grows\n");
    md.lines(60);
    md.push("more\n");
    md.lines(60);
    let rendered = md.take_rendered();
    assert_eq!(rendered.len(), 2, "one tail render per frame: {rendered:?}");
    assert!(
        rendered.iter().all(|r| r.start == tail_start),
        "{rendered:?}"
    );
    // Closing the tail renders it once more as a closed block, then only the new tail.
    md.push("\nNext block\n");
    md.lines(60);
    let rendered = md.take_rendered();
    assert_eq!(rendered.len(), 2, "{rendered:?}");
    assert!(
        rendered.iter().all(|r| r.start >= tail_start),
        "{rendered:?}"
    );
    let expected = render(md.source(), 60);
    assert_eq!(md.lines(60), expected.as_slice());
    // Nothing changed: nothing rendered.
    md.lines(60);
    assert!(md.take_rendered().is_empty());
}

#[test]
fn width_change_reflows_everything() {
    let mut md = StreamingMarkdown::new();
    md.push(REPLY);
    md.push("\n");
    let wide = md.lines(80).to_vec();
    assert_eq!(wide, render(REPLY, 80));
    md.take_rendered();
    let narrow = md.lines(20).to_vec();
    assert_eq!(narrow, render(REPLY, 20));
    assert!(narrow.len() > wide.len());
    let rendered: usize = md.take_rendered().iter().map(|r| r.len()).sum();
    assert!(
        rendered >= REPLY.trim().len(),
        "reflow re-renders the whole source"
    );
    assert_eq!(md.height(80), wide.len());
}

#[test]
fn from_complete_equals_render() {
    for doc in DOCS {
        let mut md = StreamingMarkdown::from_complete(doc);
        assert!(md.is_finished());
        assert_eq!(md.lines(33), render(doc, 33).as_slice());
        assert_eq!(md.source(), *doc);
    }
}

#[test]
fn push_after_finish_keeps_rendering_everything() {
    let mut md = StreamingMarkdown::from_complete("a\n\nb");
    md.lines(20);
    md.push("c\n\nd");
    assert_eq!(md.lines(20), render("a\n\nbc\n\nd", 20).as_slice());
}

#[test]
fn chunking_matches_whole_document_rendering() {
    // Cutting at blank lines must not change the result (the `<pre>` document is the
    // documented exception: an HTML block that survives blank lines).
    for doc in DOCS.iter().filter(|d| !d.contains("<pre>")) {
        for width in [13, 40, 80] {
            let mut whole = Vec::new();
            append_chunk(doc, usize::from(width), &mut whole);
            assert_eq!(
                dump(&render(doc, width)),
                dump(&whole),
                "{doc:?} at {width}"
            );
        }
    }
}
