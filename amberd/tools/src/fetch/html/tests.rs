//! The converter: what a page becomes (markdown and text), the end tags HTML implies, and
//! the bounds — nesting of every shape 10^5 to 10^6 deep converts in linear time without
//! recursion, the output ceiling, the deadline and the stop flag.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::*;

fn with_budget(html: &str, style: Style, deadline: Duration, stop: &AtomicBool) -> Converted {
    let budget = Budget {
        deadline: Instant::now() + deadline,
        stop,
        pause: None,
    };
    convert(html, style, &budget)
}

fn converted(html: &str, style: Style) -> Converted {
    with_budget(
        html,
        style,
        Duration::from_secs(600),
        &AtomicBool::new(false),
    )
}

fn markdown(html: &str) -> String {
    let out = converted(html, Style::Markdown);
    assert!(out.limits.is_empty(), "{:?}", out.limits);
    out.text
}

fn text(html: &str) -> String {
    let out = converted(html, Style::Text);
    assert!(out.limits.is_empty(), "{:?}", out.limits);
    out.text
}

const PAGE: &str = "<html><head><title>T</title><style>p{}</style></head><body>\
                    <h1>Title</h1><p>Some <b>bold</b> and <a href=\"https://x.io/a\">a link</a>.</p>\
                    <script>alert('<p>')</script><ul><li>one</li><li>two</li></ul></body></html>";

#[test]
fn html_becomes_markdown_without_scripts_and_text_without_markup() {
    assert_eq!(
        markdown(PAGE),
        "# Title\n\nSome **bold** and [a link](https://x.io/a).\n\n- one\n- two"
    );
    assert_eq!(
        text(PAGE),
        "Title\n\nSome bold and a link (https://x.io/a).\n\n- one\n- two"
    );
}

#[test]
fn elements_take_their_markdown_form() {
    for (html, expected) in [
        // Whitespace collapses; entities decode; empty markup leaves nothing.
        (
            "<p>  a \n\t b&amp;c&nbsp;d <b></b><a href=x></a></p>",
            "a b&c\u{a0}d",
        ),
        ("<h3>Three</h3><h2></h2>x", "### Three\n\nx"),
        (
            "<ol start=3><li>c<li>d<ul><li>nested</ul></ol>",
            "3. c\n4. d\n   - nested",
        ),
        ("<ul><li><ul><li>inner</ul></ul>", "- - inner"),
        (
            "<blockquote><p>q1<p>q2</blockquote>after",
            "> q1\n>\n> q2\n\nafter",
        ),
        (
            "<pre>\nfn main() {\n\n    x();\n}\n</pre>",
            "```\nfn main() {\n\n    x();\n}\n```",
        ),
        (
            "use <code>cargo  add</code> <i>now</i>",
            "use `cargo add` *now*",
        ),
        (
            "<table><tr><th>a<th>b<tr><td>1<td><p>2</p><p>3</p></table>",
            "| a | b |\n| --- | --- |\n| 1 | 2 3 |",
        ),
        ("<table><td>implied row</table>", "| implied row |\n| --- |"),
        // A table in a cell (a layout table) runs on in that cell.
        (
            "<table><tr><td>out<td><table><tr><td>in 1<td>in 2<tr><td>in 3</table></table>",
            "| out | in 1 in 2 in 3 |\n| --- | --- |",
        ),
        // Openings held until text: an empty link or emphasis leaves no line behind.
        (
            "<h1>T</h1><div><a href=/x><svg></svg></a><b> </b></div><p>next",
            "# T\n\nnext",
        ),
        ("a<b> bold </b>b", "a **bold** b"),
        ("a<br>b<hr>c", "a\nb\n\n---\n\nc"),
        (
            "<img src=/i.png alt=' an  image '><img src='data:image/png;base64,AAAA' alt=inline>",
            "![an image](/i.png)inline",
        ),
        (
            "<a href='javascript:alert(1)'>js</a> <a href='/a b'>sp</a>",
            "js [sp](</a b>)",
        ),
        ("<dl><dt>term<dd>meaning</dl>", "term\n  meaning"),
        // Dropped elements, their nesting counted; `<svg/>` drops nothing.
        ("<svg><svg></svg>hidden</svg>shown<svg/>too", "showntoo"),
        ("<script/>x</script>y", "y"),
        (
            "<noscript><p>no</p></noscript><template>t</template>ok",
            "ok",
        ),
    ] {
        assert_eq!(markdown(html), expected, "{html}");
    }
}

#[test]
fn text_keeps_words_markers_and_link_targets() {
    for (html, expected) in [
        (
            "<h2>Head</h2><p><b>bold</b> <code>c</code></p>",
            "Head\n\nbold c",
        ),
        ("<a href='#top'>top</a> <a href=/x>x</a>", "top x (/x)"),
        ("<table><tr><td>a<td>b<tr><td>c<td>d</table>", "a\tb\nc\td"),
        (
            "<blockquote>q</blockquote><pre>  kept\n  as is</pre>",
            "q\n\n  kept\n  as is",
        ),
    ] {
        assert_eq!(text(html), expected, "{html}");
    }
}

#[test]
fn implied_end_tags_keep_the_stack_flat() {
    // Thousands of unclosed items, paragraphs, cells and rows: each ends the one before,
    // so none of them reaches the depth cap.
    for (unit, count) in [
        ("<li>x", 5_000),
        ("<p>x", 5_000),
        ("<tr><td>x<td>y", 5_000),
        ("<dt>x<dd>y", 5_000),
        ("<a href=/l>x", 5_000),
        ("<h2>x", 5_000),
    ] {
        let html = format!("<ul><table>{}", unit.repeat(count));
        let out = converted(&html, Style::Markdown);
        assert!(
            !out.limits.contains(&Limit::Depth),
            "{unit}: {:?}",
            out.limits
        );
    }
}

/// The shapes a hostile page nests: `open` repeated `depth` times (`open` holds one or
/// more elements), a sentinel word, then `close` as many times; whether the nesting
/// outgrows the cap (HTML ends an `<a>` at the next one, so a chain of links stays flat).
const NESTINGS: &[(&str, &str, &str, bool)] = &[
    ("div", "<div>", "</div>", true),
    ("table", "<table><tr><td>", "</td></tr></table>", true),
    ("list", "<ul><li>", "</li></ul>", true),
    ("quote", "<blockquote>", "</blockquote>", true),
    ("unclosed div", "<div>", "", true),
    ("unclosed span", "<span>", "", true),
    ("unclosed table", "<table><tr><td>", "", true),
    ("unclosed list", "<ol><li>", "", true),
    ("formatting", "<b><i><code>", "</code></i></b>", true),
    ("misnested formatting", "<b><i>", "</b></i>", true),
    ("links", "<a href=/x>", "</a>", false),
    (
        "mixed",
        "<div><ul><li><blockquote><table><tr><td><pre><b>",
        "</b></pre></td></tr></table></blockquote></li></ul></div>",
        true,
    ),
    ("dropped", "<svg>", "", false),
];

/// Converts each shape `depth` deep (in turn as markdown and as text): it ends, in time
/// linear in the page, with the sentinel shown, the depth note where the nesting
/// outgrows the cap, and the output under its ceiling.
fn converts_every_nesting(depth: usize, shapes: &[(&str, &str, &str, bool)]) {
    for (i, (shape, open, close, outgrows)) in shapes.iter().enumerate() {
        // The `open` of a shape holds up to nine elements: deep enough at a ninth.
        let repeats = depth / open.matches('<').count().max(1);
        let html = format!("{}sentinel{}", open.repeat(repeats), close.repeat(repeats));
        let style = if i % 2 == 0 {
            Style::Markdown
        } else {
            Style::Text
        };
        let started = Instant::now();
        let out = converted(&html, style);
        let took = started.elapsed();
        // Linear, with room for a loaded machine: a debug build converts about a megabyte
        // a second; quadratic work at this depth would take hours.
        let allowed = Duration::from_secs(10) + Duration::from_secs(4 * (html.len() >> 20) as u64);
        assert!(
            took < allowed,
            "{shape} × {depth}: {took:?} for {} bytes",
            html.len()
        );
        assert_eq!(
            out.limits.contains(&Limit::Depth),
            *outgrows,
            "{shape} × {depth}: {:?}",
            out.limits
        );
        assert_eq!(
            out.text.contains("sentinel"),
            *shape != "dropped",
            "{shape} × {depth}"
        );
        assert!(
            out.text.len() <= output_limit(html.len()),
            "{shape} × {depth}: {} bytes",
            out.text.len()
        );
    }
}

#[test]
fn nesting_100_000_deep_of_every_shape_converts_in_linear_time() {
    converts_every_nesting(100_000, NESTINGS);
}

#[test]
fn nesting_a_million_deep_converts_in_linear_time() {
    converts_every_nesting(
        1_000_000,
        &[
            ("unclosed div", "<div>", "", true),
            ("unclosed mixed", "<b><ul><li><blockquote><span>", "", true),
        ],
    );
}

#[test]
fn formatting_that_would_multiply_elements_stays_linear() {
    // A tree builder reopens every unclosed formatting element in each new paragraph:
    // N of them and M paragraphs make N × M elements. Here they stay N.
    let html = format!(
        "{}{}",
        (0..2_000)
            .map(|i| format!("<b id={i}>"))
            .collect::<String>(),
        "<p>x</p>".repeat(20_000)
    );
    let started = Instant::now();
    let out = converted(&html, Style::Markdown);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.text.matches('x').count() == 20_000);
}

#[test]
fn the_output_has_a_ceiling_however_the_page_multiplies_it() {
    // Every line of a deep quote repeats its prefix: short lines, long output.
    let html = format!("{}{}", "<blockquote>".repeat(200), "x<br>".repeat(200_000));
    let out = converted(&html, Style::Markdown);
    let limit = output_limit(html.len());
    assert!(
        out.limits.contains(&Limit::Output(limit)),
        "{:?}",
        out.limits
    );
    assert!(out.text.len() <= limit, "{} > {limit}", out.text.len());
}

#[test]
fn the_deadline_stops_a_conversion_and_keeps_what_it_converted() {
    let page = "<p>word</p>".repeat(200_000);
    let out = with_budget(
        &page,
        Style::Markdown,
        Duration::ZERO,
        &AtomicBool::new(false),
    );
    assert_eq!(out.limits, [Limit::Time]);
    assert!(out.text.is_empty(), "{}", out.text);

    // Slowed down by the test pause: the deadline ends it mid-page, the part before kept.
    let stop = AtomicBool::new(false);
    let budget = Budget {
        deadline: Instant::now() + Duration::from_millis(200),
        stop: &stop,
        pause: Some(Duration::from_millis(50)),
    };
    let started = Instant::now();
    let out = convert(&page, Style::Markdown, &budget);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.limits, [Limit::Time]);
    assert!(out.text.starts_with("word\n\nword"), "{}", &out.text[..20]);
    assert!(out.text.len() < page.len() / 2, "{}", out.text.len());
}

#[test]
fn the_stop_flag_ends_a_conversion_promptly_from_another_thread() {
    let page = "<p>word</p>".repeat(200_000);
    let stop = Arc::new(AtomicBool::new(false));
    let converting = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let budget = Budget {
                deadline: Instant::now() + Duration::from_secs(600),
                stop: &stop,
                pause: Some(Duration::from_secs(1)),
            };
            convert(&page, Style::Text, &budget)
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let stopped_at = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let out = converting.join().unwrap();
    assert!(
        stopped_at.elapsed() < Duration::from_millis(500),
        "{:?}",
        stopped_at.elapsed()
    );
    assert_eq!(out.limits, [Limit::Stopped]);
}
