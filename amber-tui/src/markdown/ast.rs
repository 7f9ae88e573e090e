//! Folds pulldown-cmark events into a small block tree with styled inline text.
//!
//! Inline styling (emphasis, links, code spans, heading and table-header weight) is resolved
//! here, so the layout pass in `render.rs` only deals with blocks, widths and prefixes.

use pulldown_cmark::{
    Alignment, BrokenLink, CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd,
};
use ratatui::style::Style;

use super::theme;
use super::wrap::{Inline, clean};

/// A block of markdown, ready for layout.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    Para(Vec<Inline>),
    Heading(Vec<Inline>),
    Quote(Vec<Block>),
    List {
        start: Option<u64>,
        loose: bool,
        items: Vec<Vec<Block>>,
    },
    Code {
        lang: String,
        text: String,
    },
    Html(String),
    Rule,
    Table(Table),
}

/// A table: rows of cells of inline content; the first `head_rows` rows are the header.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub(crate) aligns: Vec<Alignment>,
    pub(crate) rows: Vec<Vec<Vec<Inline>>>,
    pub(crate) head_rows: usize,
}

/// An open container.
enum Frame {
    Blocks(Vec<Block>),
    Quote(Vec<Block>),
    List {
        start: Option<u64>,
        loose: bool,
        items: Vec<Vec<Block>>,
    },
    Item(Vec<Block>),
    Table {
        table: Table,
        row: Vec<Vec<Inline>>,
    },
}

/// The open leaf block collecting text.
enum Leaf {
    Para,
    Heading,
    Cell,
    Code { lang: String, text: String },
    Html(String),
}

/// An open link or image: its destination and the plain text seen inside it so far.
struct OpenLink {
    url: String,
    text: String,
}

/// The most containers (quotes, lists, items) open at once; deeper ones are not opened
/// and their content flows into the innermost open one. Layout and drop recurse on the
/// block tree, so its depth stays this small whatever a message nests (a model can be led
/// to echo `- - - - …` thousands deep).
pub(crate) const MAX_CONTAINERS: usize = 32;

struct Builder {
    frames: Vec<Frame>,
    /// Containers started past `MAX_CONTAINERS` and not yet ended.
    flattened: usize,
    leaf: Option<Leaf>,
    inlines: Vec<Inline>,
    styles: Vec<Style>,
    links: Vec<OpenLink>,
}

/// Parses markdown (CommonMark + tables, strikethrough, task lists) into blocks.
pub(crate) fn parse(text: &str) -> Vec<Block> {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut b = Builder {
        frames: vec![Frame::Blocks(Vec::new())],
        flattened: 0,
        leaf: None,
        inlines: Vec::new(),
        styles: Vec::new(),
        links: Vec::new(),
    };
    // `[text][ref]` whose definition is not in this chunk: show the text as a link (without
    // a destination) rather than raw brackets. Shortcut `[text]` stays literal.
    let broken = |link: BrokenLink<'_>| match link.link_type {
        LinkType::Reference | LinkType::Collapsed => Some((CowStr::from(""), CowStr::from(""))),
        _ => None,
    };
    for ev in Parser::new_with_broken_link_callback(text, opts, Some(broken)) {
        b.event(ev);
    }
    b.finish()
}

impl Builder {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => match &mut self.leaf {
                Some(Leaf::Code { text, .. }) => text.push_str(&t),
                Some(Leaf::Html(html)) => html.push_str(&t),
                _ => self.text(&t, self.style()),
            },
            Event::Html(t) => match &mut self.leaf {
                Some(Leaf::Html(html)) => html.push_str(&t),
                _ => self.text(&t, self.style()),
            },
            Event::Code(t) => self.text(&t, theme::inline_code(self.style())),
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::InlineHtml(t) => {
                self.text(&t, self.style());
            }
            Event::FootnoteReference(t) => self.text(&format!("[^{t}]"), self.style()),
            Event::SoftBreak => self.inline(Inline::Soft),
            Event::HardBreak => self.inline(Inline::Hard),
            Event::Rule => {
                self.flush_para();
                self.push_block(Block::Rule);
            }
            Event::TaskListMarker(done) => {
                let (mark, style) = if done {
                    ("[x]", theme::TASK_DONE)
                } else {
                    ("[ ]", theme::TASK_OPEN)
                };
                self.text(mark, style);
                self.text(" ", self.style());
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        if matches!(tag, Tag::BlockQuote(_) | Tag::List(_) | Tag::Item)
            && self.frames.len() > MAX_CONTAINERS
        {
            self.flush_para();
            self.flattened += 1;
            return;
        }
        match tag {
            Tag::Paragraph => {
                self.flush_para();
                self.mark_loose();
                self.leaf = Some(Leaf::Para);
            }
            Tag::Heading { level, .. } => {
                self.flush_para();
                self.leaf = Some(Leaf::Heading);
                self.styles.push(theme::heading(level as u8));
            }
            Tag::BlockQuote(_) => {
                self.flush_para();
                self.frames.push(Frame::Quote(Vec::new()));
            }
            Tag::CodeBlock(kind) => {
                self.flush_para();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
                        .next()
                        .map(|l| clean(l).into_owned())
                        .unwrap_or_default(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.leaf = Some(Leaf::Code {
                    lang,
                    text: String::new(),
                });
            }
            Tag::HtmlBlock => {
                self.flush_para();
                self.leaf = Some(Leaf::Html(String::new()));
            }
            Tag::List(start) => {
                self.flush_para();
                self.frames.push(Frame::List {
                    start,
                    loose: false,
                    items: Vec::new(),
                });
            }
            Tag::Item => {
                self.flush_para();
                self.frames.push(Frame::Item(Vec::new()));
            }
            Tag::Table(aligns) => {
                self.flush_para();
                let table = Table {
                    aligns,
                    rows: Vec::new(),
                    head_rows: 0,
                };
                self.frames.push(Frame::Table {
                    table,
                    row: Vec::new(),
                });
            }
            Tag::TableHead => self.push_style(theme::table_head),
            Tag::TableRow => {}
            Tag::TableCell => {
                self.inlines.clear();
                self.leaf = Some(Leaf::Cell);
            }
            Tag::Emphasis => self.push_style(theme::emphasis),
            Tag::Strong => self.push_style(theme::strong),
            Tag::Strikethrough => self.push_style(theme::strikethrough),
            Tag::Superscript | Tag::Subscript => self.push_style(|s| s),
            Tag::Link { dest_url, .. } => {
                self.push_style(theme::link);
                self.links.push(OpenLink {
                    url: dest_url.into_string(),
                    text: String::new(),
                });
            }
            Tag::Image { dest_url, .. } => {
                self.push_style(theme::image);
                self.links.push(OpenLink {
                    url: dest_url.into_string(),
                    text: String::new(),
                });
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.flush_para(),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        // Events nest, and past the cap every container is flattened: a container's end
        // while some are flattened is the innermost flattened one's.
        if matches!(tag, TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::Item)
            && self.flattened > 0
        {
            self.flush_para();
            self.flattened -= 1;
            return;
        }
        match tag {
            TagEnd::Paragraph => self.flush_para(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                if matches!(self.leaf, Some(Leaf::Heading)) {
                    self.leaf = None;
                    let inlines = std::mem::take(&mut self.inlines);
                    self.push_block(Block::Heading(inlines));
                }
            }
            TagEnd::CodeBlock | TagEnd::HtmlBlock => match self.leaf.take() {
                Some(Leaf::Code { lang, text }) => self.push_block(Block::Code { lang, text }),
                Some(Leaf::Html(html)) => self.push_block(Block::Html(html)),
                other => self.leaf = other,
            },
            TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::Item | TagEnd::Table => {
                self.flush_para();
                self.close_frame();
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if matches!(tag, TagEnd::TableHead) {
                    self.styles.pop();
                }
                if let Some(Frame::Table { table, row }) = self.frames.last_mut() {
                    table.rows.push(std::mem::take(row));
                    if matches!(tag, TagEnd::TableHead) {
                        table.head_rows = table.rows.len();
                    }
                }
            }
            TagEnd::TableCell => {
                self.leaf = None;
                let cell = std::mem::take(&mut self.inlines);
                if let Some(Frame::Table { row, .. }) = self.frames.last_mut() {
                    row.push(cell);
                }
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some(link) = self.links.pop() {
                    self.link_suffix(link, matches!(tag, TagEnd::Image));
                }
            }
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.flush_para(),
        }
    }

    /// After a link's text: its destination, dim, unless the text already says it.
    fn link_suffix(&mut self, link: OpenLink, image: bool) {
        let url = link.url.as_str();
        let same = link.text == url
            || url.strip_prefix("mailto:") == Some(link.text.as_str())
            || url.is_empty();
        if same {
            return;
        }
        let style = theme::url(self.style());
        if image && link.text.is_empty() {
            self.text(url, style);
        } else {
            self.text(&format!(" ({url})"), style);
        }
    }

    /// Appends text to the open leaf (opening an implicit paragraph in a tight list item).
    fn text(&mut self, text: &str, style: Style) {
        let text = clean(text);
        if let Some(link) = self.links.last_mut() {
            link.text.push_str(&text);
        }
        if let Some(Inline::Text(prev, prev_style)) = self.inlines.last_mut()
            && *prev_style == style
            && self.leaf.is_some()
        {
            prev.push_str(&text);
            return;
        }
        self.inline(Inline::Text(text.into_owned(), style));
    }

    fn inline(&mut self, inline: Inline) {
        if self.leaf.is_none() {
            self.leaf = Some(Leaf::Para);
        }
        self.inlines.push(inline);
    }

    /// Closes an open (explicit or implicit) paragraph.
    fn flush_para(&mut self) {
        if matches!(self.leaf, Some(Leaf::Para)) {
            self.leaf = None;
            let inlines = std::mem::take(&mut self.inlines);
            self.push_block(Block::Para(inlines));
        }
    }

    /// A paragraph directly in a list item makes the list loose.
    fn mark_loose(&mut self) {
        let n = self.frames.len();
        if n >= 2
            && matches!(self.frames[n - 1], Frame::Item(_))
            && let Frame::List { loose, .. } = &mut self.frames[n - 2]
        {
            *loose = true;
        }
    }

    fn push_block(&mut self, block: Block) {
        match self.frames.last_mut() {
            Some(Frame::Blocks(bs) | Frame::Quote(bs) | Frame::Item(bs)) => bs.push(block),
            Some(Frame::List { items, .. }) => items.push(vec![block]),
            Some(Frame::Table { .. }) | None => {}
        }
    }

    /// Pops the innermost container and adds it to its parent.
    fn close_frame(&mut self) {
        if self.frames.len() < 2 {
            return;
        }
        match self.frames.pop() {
            Some(Frame::Quote(bs)) => self.push_block(Block::Quote(bs)),
            Some(Frame::List {
                start,
                loose,
                items,
            }) => {
                self.push_block(Block::List {
                    start,
                    loose,
                    items,
                });
            }
            Some(Frame::Item(bs)) => match self.frames.last_mut() {
                Some(Frame::List { items, .. }) => items.push(bs),
                _ => {
                    for b in bs {
                        self.push_block(b);
                    }
                }
            },
            Some(Frame::Table { table, .. }) => self.push_block(Block::Table(table)),
            Some(Frame::Blocks(bs)) => {
                for b in bs {
                    self.push_block(b);
                }
            }
            None => {}
        }
    }

    fn finish(mut self) -> Vec<Block> {
        self.flush_para();
        match self.leaf.take() {
            Some(Leaf::Code { lang, text }) => self.push_block(Block::Code { lang, text }),
            Some(Leaf::Html(html)) => self.push_block(Block::Html(html)),
            Some(Leaf::Heading) => {
                let inlines = std::mem::take(&mut self.inlines);
                self.push_block(Block::Heading(inlines));
            }
            Some(Leaf::Para | Leaf::Cell) | None => {}
        }
        while self.frames.len() > 1 {
            self.close_frame();
        }
        match self.frames.pop() {
            Some(Frame::Blocks(bs)) => bs,
            _ => Vec::new(),
        }
    }
}
