//! Snapshot tests of [`super::render`]: each snapshot is a plain-text dump of the lines
//! where every styled span shows as `[tags]text[/]` (tags: the ANSI colour name and
//! `b` bold, `i` italic, `u` underlined, `d` dim, `r` reversed, `s` crossed out).
use std::fmt::Write as _;

use insta::assert_snapshot;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

use super::render;
use super::wrap::text_width;

/// The compact dump of lines used by all snapshots.
pub(crate) fn dump(lines: &[Line<'_>]) -> String {
    let mut s = String::new();
    for line in lines {
        for span in &line.spans {
            let tags = style_tags(span.style);
            if tags.is_empty() {
                s.push_str(&span.content);
            } else {
                write!(s, "[{tags}]{}[/]", span.content).unwrap();
            }
        }
        s.push('\n');
    }
    s
}

fn style_tags(style: Style) -> String {
    let mut tags = Vec::new();
    if let Some(fg) = style.fg {
        tags.push(format!("{fg:?}").to_lowercase());
    }
    for (m, tag) in [
        (Modifier::BOLD, "b"),
        (Modifier::ITALIC, "i"),
        (Modifier::UNDERLINED, "u"),
        (Modifier::DIM, "d"),
        (Modifier::REVERSED, "r"),
        (Modifier::CROSSED_OUT, "s"),
    ] {
        if style.add_modifier.contains(m) {
            tags.push(tag.to_owned());
        }
    }
    tags.join(",")
}

/// Checks the invariants every rendering must keep.
pub(crate) fn check(lines: &[Line<'_>], width: u16) {
    for line in lines {
        let w: usize = line.spans.iter().map(|s| text_width(&s.content)).sum();
        assert!(w <= usize::from(width), "line wider than {width}: {line:?}");
        for span in &line.spans {
            let st = span.style;
            assert!(st.bg.is_none(), "background colour in {span:?}");
            assert!(
                !matches!(st.fg, Some(Color::Rgb(..) | Color::Indexed(_))),
                "non-ANSI colour in {span:?}"
            );
            assert!(
                !span.content.contains(|c: char| c.is_control()),
                "control char {span:?}"
            );
        }
    }
    if let (Some(first), Some(last)) = (lines.first(), lines.last()) {
        assert!(
            !first.spans.is_empty() && !last.spans.is_empty(),
            "blank first/last line"
        );
    }
}

/// Renders, checks the invariants, and dumps.
pub(crate) fn snap(md: &str, width: u16) -> String {
    let lines = render(md, width);
    check(&lines, width);
    dump(&lines)
}

#[test]
fn headings() {
    let md =
        "# Title\n\n## Section *two*\n\n### Third\n\nSetext\n======\n\n#### Deep `code`\n\ntext";
    assert_snapshot!(snap(md, 40));
}

#[test]
fn emphasis_strong_strike_nesting() {
    let md = "Plain *em* _em_ **strong** __strong__ ~~gone~~ ***both*** \
              **bold *and italic* inside** *it **bo** it* ~~**struck bold**~~ a*b*c 2 * 3 * 4";
    assert_snapshot!(snap(md, 60));
}

#[test]
fn lists_nested() {
    let md = "- one\n- two\n  - inner a\n  - inner b\n    - deeper\n- three with a long item \
              that wraps onto the next line nicely";
    assert_snapshot!(snap(md, 30));
}

#[test]
fn lists_ordered_with_start() {
    let md = "7. seven\n8. eight\n9. nine\n10. ten, which is long enough to wrap\n\nbreak\n\n\
              1. first\n   1. nested\n   2. nested two\n2. second";
    assert_snapshot!(snap(md, 30));
}

#[test]
fn lists_tasks() {
    let md = "- [ ] todo item\n- [x] done item\n- [ ] a long task that needs wrapping here";
    assert_snapshot!(snap(md, 26));
}

#[test]
fn lists_loose() {
    let md = "- first para\n\n  second para of first\n\n- second item\n\n\
              text after\n\n* other list";
    assert_snapshot!(snap(md, 40));
}

#[test]
fn quotes_nested_with_list() {
    let md = "> quoted text that is long enough to wrap around\n>\n> > nested quote\n>\n\
              > - item in quote\n> - another\n>\n> ```sh\n> ls -la\n> ```";
    assert_snapshot!(snap(md, 30));
}

#[test]
fn links() {
    let md = "See [the docs](https://example.com/docs) and <https://example.com>, \
              mail <me@example.com>, [**bold link**](http://x.y), \
              ![diagram](img.png) and [ref][r].\n\n[r]: https://ref.example";
    assert_snapshot!(snap(md, 50));
}

#[test]
fn inline_code() {
    let md = "Run `cargo test` then `a  b` and **`bold code`**; a `very_long_identifier_name_here` \
              wraps as a word.";
    assert_snapshot!(snap(md, 30));
}

#[test]
fn code_fences() {
    let md = "```rust\nfn main() {\n    println!(\"hi\");\n\n\tlet tab = 1;\n}\n```\n\n\
              ```\nno language\n```\n\n~~~python extra info\nprint(1)\n~~~\n\n    indented code\n\n\
              ```\n```";
    assert_snapshot!(snap(md, 40));
}

#[test]
fn code_long_lines() {
    let md = "```text\nshort\n        indented and then a line that is far too long for the width\n\
              日本語のコードコメントが長い行です\n```";
    assert_snapshot!(snap(md, 20));
}

const WRAP_TEXT: &str = "The quick brown fox jumps over the lazy dog; \
    日本語の文章は空白なしで折り返されます。 Emoji 🎉 party 👩‍💻 coder 🇫🇷 flag \
    and a supercalifragilisticexpialidocious-word-that-never-ends-at-all here.";

#[test]
fn wrap_at_20() {
    assert_snapshot!(snap(WRAP_TEXT, 20));
}

#[test]
fn wrap_at_40() {
    assert_snapshot!(snap(WRAP_TEXT, 40));
}

#[test]
fn wrap_at_80() {
    assert_snapshot!(snap(WRAP_TEXT, 80));
}

#[test]
fn tables() {
    let md = "| Name | Qty | Note |\n|:-----|----:|:----:|\n| apple | 3 | red |\n\
              | 日本 | 12 | *ok* |\n| `x` | 1 |  |";
    assert_snapshot!(snap(md, 40));
}

#[test]
fn tables_too_wide() {
    let md = "| Column one | Column two | Column three |\n|---|---|---|\n\
              | some longer text | more text here | and more |";
    assert_snapshot!(snap(md, 30));
}

#[test]
fn rule_and_html() {
    let md = "above\n\n---\n\nbelow <b>bold?</b>\n\n<div>\nraw html block\n</div>\n\n***";
    assert_snapshot!(snap(md, 20));
}

#[test]
fn hard_and_soft_breaks() {
    let md = "line one  \nline two\\\nline three\nsoft continues";
    assert_snapshot!(snap(md, 40));
}

pub(crate) const REPLY: &str = r#"I found the problem. The `Config::load` function reads the file **before** the
directory exists, so on a fresh machine it fails with `NotFound`.

## What I changed

1. Create the directory first in `config.rs`:

   ```rust
   pub fn load(path: &Path) -> Result<Config> {
       std::fs::create_dir_all(path.parent().unwrap_or(path))?;
       let text = std::fs::read_to_string(path)?;
       Ok(toml::from_str(&text)?)
   }
   ```

2. Added a test, `loads_on_fresh_machine`, which *used to fail*.

> **Note:** the old behaviour is kept for read-only file systems; see
> [issue 42](https://github.com/amber-agent/amber/issues/42).

| File | Lines |
|------|------:|
| `src/config.rs` | +4 −1 |
| `tests/config.rs` | +18 |

- [x] fix
- [ ] release notes

Run `cargo test -p amber-config` to check. That's all — ~~no~~ other changes."#;

#[test]
fn realistic_reply() {
    assert_snapshot!(snap(REPLY, 60));
}

#[test]
fn realistic_reply_narrow() {
    assert_snapshot!(snap(REPLY, 24));
}

#[test]
fn tiny_widths_do_not_panic() {
    for width in 0..6 {
        let lines = render(REPLY, width);
        assert!(!lines.is_empty());
        let _ = render(WRAP_TEXT, width);
    }
}

#[test]
fn empty_and_blank_inputs() {
    assert!(render("", 40).is_empty());
    assert!(render("\n\n  \n", 40).is_empty());
    assert!(render("[r]: https://x.y\n\n[s]: https://z", 40).is_empty());
    assert_eq!(dump(&render("a\n\n[r]: https://x.y\n\nb", 40)), "a\n\nb\n");
}

#[test]
fn lines_never_exceed_width() {
    for text in [REPLY, WRAP_TEXT] {
        for width in 6..=100 {
            check(&render(text, width), width);
        }
    }
}

/// Nesting a message controls cannot overflow the stack: past `MAX_CONTAINERS` quotes,
/// lists and items flow into the innermost open one, and the text is still shown.
#[test]
fn deep_nesting_is_flattened_not_recursed() {
    for (shape, unit) in [
        ("list", "- "),
        ("ordered", "1. "),
        ("quote", "> "),
        ("mixed", "> - "),
    ] {
        for depth in [100usize, 20_000] {
            let text = format!("{}sentinel\n\nafter", unit.repeat(depth));
            let lines = render(&text, 80);
            let shown = dump(&lines);
            assert!(shown.contains("sentinel"), "{shape} × {depth}");
            assert!(shown.contains("after"), "{shape} × {depth}");
        }
    }
}
