//! The page's elements, from html5ever's tokenizer to the `Writer`. There is no DOM and no
//! tree builder (whose open-element scans grow with the nesting and whose formatting
//! reconstruction multiplies elements): an explicit stack of open elements, at most
//! `MAX_DEPTH` deep — a start tag past it opens nothing and its text flows on without
//! structure —, the end tags HTML implies (`<li>` ends the previous item, `<td>` the
//! previous cell, a block an open `<p>`), and each element's markdown or text markup.
//! No token scans the stack: where each name and each scope's boundaries are open is kept
//! as it changes, so finding the element an end tag ends costs the same at any depth.

use std::cell::RefCell;
use std::collections::HashMap;

use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{Tag, TagKind, Token, TokenSink, TokenSinkResult};
use html5ever::{LocalName, local_name};

use super::writer::Writer;

/// The deepest nesting of open elements kept as structure.
pub(crate) const MAX_DEPTH: usize = 256;

/// What the page becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Markdown,
    /// The words, blocks on their own lines, list markers and link targets kept.
    Text,
}

/// Elements whose content is not shown.
const DROPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "title",
    "noembed", "noframes",
];

/// Elements that never hold content (their end tag is never expected).
const VOID: &[&str] = &[
    "area", "base", "col", "embed", "input", "keygen", "link", "meta", "param", "source", "track",
    "wbr", "frame",
];

/// Containers set apart by a line end.
const BLOCKS: &[&str] = &[
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "address",
    "form",
    "fieldset",
    "figure",
    "figcaption",
    "details",
    "summary",
    "center",
    "hgroup",
    "dialog",
    "legend",
    "caption",
    "body",
    "dl",
    "dt",
    "search",
    "option",
];

/// Where the search for an element to end stops (HTML's scopes): an element is ended
/// only when none of its scope's boundaries was opened after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Default,
    ListItem,
    Button,
    Table,
    /// A cell ends at its row or table.
    Row,
    Select,
}

impl Scope {
    const ALL: [Scope; 6] = [
        Scope::Default,
        Scope::ListItem,
        Scope::Button,
        Scope::Table,
        Scope::Row,
        Scope::Select,
    ];

    fn bounded_by(self, name: &str) -> bool {
        const DEFAULT: &[&str] = &[
            "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template",
        ];
        match self {
            Scope::Default => DEFAULT.contains(&name),
            Scope::ListItem => DEFAULT.contains(&name) || matches!(name, "ol" | "ul"),
            Scope::Button => DEFAULT.contains(&name) || name == "button",
            Scope::Table => matches!(name, "html" | "table" | "template"),
            Scope::Row => matches!(name, "html" | "table" | "tr"),
            Scope::Select => matches!(name, "select" | "datalist"),
        }
    }
}

const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];

/// The name an element is found by: any heading ends any heading, so all are `h1`.
fn key(name: &LocalName) -> LocalName {
    if HEADINGS.contains(&&**name) {
        local_name!("h1")
    } else {
        name.clone()
    }
}

/// What an open element does when it ends.
enum Role {
    /// Nothing: matched by its end tag, no more.
    Inline,
    /// Set apart by this many line ends.
    Block(usize),
    Heading {
        at: usize,
    },
    List {
        ordered: bool,
        next: u64,
        lines: usize,
    },
    Item {
        prefix: usize,
        at: usize,
    },
    Indented {
        prefix: usize,
        lines: usize,
    },
    Pre,
    Delimited {
        at: usize,
        markup: &'static str,
    },
    Link {
        at: usize,
        href: String,
    },
    Table,
    Row {
        cells: usize,
    },
    Cell,
}

struct Open {
    name: LocalName,
    role: Role,
}

struct OpenTable {
    /// Opened inside a cell (a layout table): its rows and cells run on in that cell as
    /// plain text, without pipes.
    nested: bool,
    /// Its header separator is written.
    separated: bool,
}

pub(super) struct Elements {
    style: Style,
    writer: Writer,
    stack: Vec<Open>,
    /// Where each name (`key`) is open on the stack, innermost last.
    positions: HashMap<LocalName, Vec<usize>>,
    /// Per scope (`Scope::ALL`'s order), where its boundaries are open, innermost last.
    boundaries: [Vec<usize>; Scope::ALL.len()],
    /// Inside a dropped element: its name and how many of it are open.
    dropping: Option<(LocalName, usize)>,
    /// Open `<pre>`s: their text is kept as is.
    pre: usize,
    /// The token before was `<pre>`: a newline starting the text is not content.
    pre_just_opened: bool,
    /// The open tables, innermost last.
    tables: Vec<OpenTable>,
    /// A start tag came past `MAX_DEPTH`.
    too_deep: bool,
}

/// The tokenizer's side of `Elements` (it hands tokens through a shared reference).
pub(super) struct Sink(pub(super) RefCell<Elements>);

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        self.0.borrow_mut().token(token)
    }
}

/// What the tokenizer reads after this start tag: raw text for script, style …
fn content_state(name: &str) -> TokenSinkResult<()> {
    match name {
        "script" => TokenSinkResult::RawData(RawKind::ScriptData),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => {
            TokenSinkResult::RawData(RawKind::Rawtext)
        }
        "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
        "plaintext" => TokenSinkResult::Plaintext,
        _ => TokenSinkResult::Continue,
    }
}

fn attr(tag: &Tag, name: &str) -> Option<String> {
    tag.attrs
        .iter()
        .find(|a| &*a.name.local == name)
        .map(|a| a.value.trim().to_owned())
}

impl Elements {
    pub(super) fn new(style: Style, output_limit: usize) -> Self {
        Self {
            style,
            writer: Writer::new(output_limit),
            stack: Vec::new(),
            positions: HashMap::new(),
            boundaries: Default::default(),
            dropping: None,
            pre: 0,
            pre_just_opened: false,
            tables: Vec::new(),
            too_deep: false,
        }
    }

    pub(super) fn too_deep(&self) -> bool {
        self.too_deep
    }

    pub(super) fn output_full(&self) -> bool {
        self.writer.full()
    }

    /// Ends what is still open and returns the output.
    pub(super) fn finish(mut self) -> String {
        self.end_down_to(0);
        self.writer.finish()
    }

    fn markdown(&self) -> bool {
        self.style == Style::Markdown
    }

    fn token(&mut self, token: Token) -> TokenSinkResult<()> {
        let pre_just_opened = std::mem::take(&mut self.pre_just_opened);
        match token {
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag => return self.start_tag(tag),
                TagKind::EndTag => self.end_tag(&tag),
            },
            Token::CharacterTokens(text) if self.dropping.is_none() => {
                let text = if pre_just_opened {
                    text.strip_prefix('\n').unwrap_or(&text)
                } else {
                    &text
                };
                if self.pre > 0 {
                    self.writer.verbatim(text);
                } else {
                    self.writer.text(text);
                }
            }
            Token::EOFToken => self.end_down_to(0),
            _ => {}
        }
        TokenSinkResult::Continue
    }

    fn start_tag(&mut self, tag: Tag) -> TokenSinkResult<()> {
        let state = content_state(&tag.name);
        if let Some((name, depth)) = &mut self.dropping {
            if *name == tag.name && !tag.self_closing {
                *depth += 1;
            }
            return state;
        }
        let name: &str = &tag.name;
        if DROPPED.contains(&name) {
            // `<svg/>` is empty; `<script/>` is not (HTML ignores the slash there).
            if !tag.self_closing || state != TokenSinkResult::Continue {
                self.dropping = Some((tag.name.clone(), 1));
            }
            return state;
        }
        match name {
            "br" => self.writer.block(1),
            "hr" => {
                self.end_open_p();
                self.writer.block(2);
                if self.markdown() {
                    self.writer.line("---");
                }
                self.writer.block(2);
            }
            "img" | "image" => self.image(&tag),
            _ if VOID.contains(&name) => {}
            _ => self.open(tag),
        }
        state
    }

    fn end_tag(&mut self, tag: &Tag) {
        if let Some((name, depth)) = &mut self.dropping {
            if *name == tag.name {
                *depth -= 1;
                if *depth == 0 {
                    self.dropping = None;
                }
            }
            return;
        }
        let name: &str = &tag.name;
        if name == "br" {
            // HTML reads `</br>` as `<br>`.
            self.writer.block(1);
            return;
        }
        let scope = match name {
            "li" => Scope::ListItem,
            "p" => Scope::Button,
            "tr" | "td" | "th" | "thead" | "tbody" | "tfoot" | "table" => Scope::Table,
            _ => Scope::Default,
        };
        self.end_nearest(&[key(&tag.name)], scope);
    }

    /// Where the innermost open element of these names is.
    fn nearest(&self, names: &[LocalName]) -> Option<usize> {
        names
            .iter()
            .filter_map(|name| self.positions.get(name)?.last().copied())
            .max()
    }

    /// Ends the innermost open element of these names and all opened after it, unless a
    /// boundary of `scope` was opened after it.
    fn end_nearest(&mut self, names: &[LocalName], scope: Scope) {
        let Some(at) = self.nearest(names) else {
            return;
        };
        let boundary = self.boundaries[scope as usize].last().copied();
        // The element may be a boundary itself (`td`, `table`).
        if boundary.is_none_or(|b| b <= at) {
            self.end_down_to(at);
        }
    }

    fn end_open_p(&mut self) {
        self.end_nearest(&[local_name!("p")], Scope::Button);
    }

    /// Ends the open elements from the top of the stack down to index `i`, included.
    fn end_down_to(&mut self, i: usize) {
        while self.stack.len() > i {
            let Some(open) = self.stack.pop() else { break };
            let at = self.stack.len();
            if let Some(positions) = self.positions.get_mut(&key(&open.name)) {
                positions.pop();
            }
            for boundaries in &mut self.boundaries {
                if boundaries.last() == Some(&at) {
                    boundaries.pop();
                }
            }
            self.close(open.role);
        }
    }

    /// The end tags a start tag implies, then the element opened (unless too deep).
    fn open(&mut self, tag: Tag) {
        let name: &str = &tag.name;
        match name {
            "li" => self.end_nearest(&[local_name!("li")], Scope::ListItem),
            "dt" | "dd" => {
                self.end_nearest(&[local_name!("dt"), local_name!("dd")], Scope::Default);
            }
            "td" | "th" => self.end_nearest(&[local_name!("td"), local_name!("th")], Scope::Row),
            "tr" => self.end_nearest(&[local_name!("tr")], Scope::Table),
            "a" => self.end_nearest(&[local_name!("a")], Scope::Default),
            "option" => self.end_nearest(&[local_name!("option")], Scope::Select),
            _ => {}
        }
        let is_heading = HEADINGS.contains(&name);
        if is_heading
            && self
                .stack
                .last()
                .is_some_and(|top| HEADINGS.contains(&&*top.name))
        {
            let top = self.stack.len() - 1;
            self.end_down_to(top);
        }
        let blockish = is_heading
            || BLOCKS.contains(&name)
            || matches!(
                name,
                "p" | "ul"
                    | "ol"
                    | "menu"
                    | "dir"
                    | "li"
                    | "dd"
                    | "blockquote"
                    | "pre"
                    | "listing"
                    | "xmp"
                    | "plaintext"
                    | "table"
                    | "tr"
                    | "td"
                    | "th"
            );
        if blockish && !matches!(name, "li" | "dd" | "dt" | "td" | "th" | "tr" | "option") {
            self.end_open_p();
        }
        if self.stack.len() >= MAX_DEPTH {
            // Opens nothing: what follows flows on in the current block, still on lines
            // of its own where blocks begin.
            self.too_deep = true;
            if blockish {
                self.writer.block(1);
            }
            return;
        }
        if matches!(name, "td" | "th") && self.in_grid() && self.open_row().is_none() {
            self.push_open(LocalName::from("tr"), Role::Row { cells: 0 });
            self.writer.block(1);
            if self.stack.len() >= MAX_DEPTH {
                self.too_deep = true;
                return;
            }
        }
        let role = self.role_of(&tag);
        self.push_open(tag.name, role);
    }

    fn push_open(&mut self, name: LocalName, role: Role) {
        let at = self.stack.len();
        self.positions.entry(key(&name)).or_default().push(at);
        for scope in Scope::ALL {
            if scope.bounded_by(&name) {
                self.boundaries[scope as usize].push(at);
            }
        }
        self.stack.push(Open { name, role });
    }

    /// The innermost open table lays out rows and cells (it is not inside a cell).
    fn in_grid(&self) -> bool {
        self.tables.last().is_some_and(|table| !table.nested)
    }

    /// The innermost open row, if it belongs to the innermost open table.
    fn open_row(&self) -> Option<usize> {
        let row = self.nearest(&[local_name!("tr")])?;
        let table = self.nearest(&[local_name!("table")]);
        (table.is_none_or(|t| t < row) && matches!(self.stack[row].role, Role::Row { .. }))
            .then_some(row)
    }

    /// The innermost open list, if any.
    fn open_list(&self) -> Option<usize> {
        self.nearest(&[
            local_name!("ul"),
            local_name!("ol"),
            local_name!("menu"),
            local_name!("dir"),
        ])
    }

    /// Starts the element's markup; what to do at its end.
    fn role_of(&mut self, tag: &Tag) -> Role {
        let name: &str = &tag.name;
        let markdown = self.markdown();
        let grid = self.in_grid();
        let w = &mut self.writer;
        match name {
            "p" => {
                w.block(2);
                Role::Block(2)
            }
            _ if HEADINGS.contains(&name) => {
                w.block(2);
                if markdown {
                    let level = name[1..].parse::<usize>().unwrap_or(1);
                    w.marker(&format!("{} ", "#".repeat(level)));
                }
                Role::Heading { at: w.position() }
            }
            "ul" | "ol" | "menu" | "dir" => {
                let lines = if self.in_item() { 1 } else { 2 };
                let next = attr(tag, "start").and_then(|s| s.parse().ok()).unwrap_or(1);
                self.writer.block(lines);
                Role::List {
                    ordered: name == "ol",
                    next,
                    lines,
                }
            }
            "li" => {
                let marker = self.next_marker();
                let w = &mut self.writer;
                w.block(1);
                w.marker(&marker);
                let prefix = w.push_prefix(&" ".repeat(marker.len()));
                Role::Item {
                    prefix,
                    at: w.position(),
                }
            }
            "dd" => {
                w.block(1);
                Role::Indented {
                    prefix: w.push_prefix("  "),
                    lines: 1,
                }
            }
            "blockquote" => {
                w.block(2);
                Role::Indented {
                    prefix: w.push_prefix(if markdown { "> " } else { "" }),
                    lines: 2,
                }
            }
            "pre" | "listing" | "xmp" | "plaintext" => {
                w.block(2);
                if markdown && self.pre == 0 {
                    w.line("```");
                }
                self.pre += 1;
                self.pre_just_opened = true;
                Role::Pre
            }
            "code" | "kbd" | "samp" | "tt" if markdown && self.pre == 0 => Role::Delimited {
                at: w.open_inline("`"),
                markup: "`",
            },
            "b" | "strong" if markdown && self.pre == 0 => Role::Delimited {
                at: w.open_inline("**"),
                markup: "**",
            },
            "i" | "em" if markdown && self.pre == 0 => Role::Delimited {
                at: w.open_inline("*"),
                markup: "*",
            },
            "a" => match attr(tag, "href").filter(|h| shown_href(h)) {
                Some(href) if markdown => Role::Link {
                    at: w.open_inline("["),
                    href,
                },
                Some(href) if !href.starts_with('#') => Role::Link {
                    at: w.position(),
                    href,
                },
                _ => Role::Inline,
            },
            "table" => {
                w.block(2);
                self.tables.push(OpenTable {
                    nested: w.in_cell(),
                    separated: false,
                });
                Role::Table
            }
            "tr" if grid => {
                w.block(1);
                Role::Row { cells: 0 }
            }
            "td" | "th" if grid => self.cell(),
            "tr" | "td" | "th" => {
                w.block(1);
                Role::Block(1)
            }
            _ if BLOCKS.contains(&name) => {
                w.block(1);
                Role::Block(1)
            }
            _ => Role::Inline,
        }
    }

    /// A cell of the innermost table's open row: `| ` before the first, ` | ` (a tab in
    /// text) between.
    fn cell(&mut self) -> Role {
        let first = match self.open_row().map(|row| &mut self.stack[row].role) {
            Some(Role::Row { cells }) => {
                *cells += 1;
                *cells == 1
            }
            _ => true,
        };
        let separator = match (self.style, first) {
            (Style::Markdown, true) => "| ",
            (Style::Markdown, false) => " | ",
            (Style::Text, true) => "",
            (Style::Text, false) => "\t",
        };
        if !separator.is_empty() {
            self.writer.lead(separator);
        }
        self.writer.enter_cell();
        Role::Cell
    }

    /// Inside a list item (a list there is one line apart, not a blank one).
    fn in_item(&self) -> bool {
        self.nearest(&[local_name!("li")])
            .is_some_and(|item| self.open_list().is_none_or(|list| list < item))
    }

    /// `- `, or `N. ` in an ordered list (counting on).
    fn next_marker(&mut self) -> String {
        match self.open_list().map(|list| &mut self.stack[list].role) {
            Some(Role::List {
                ordered: true,
                next,
                ..
            }) => {
                let marker = format!("{next}. ");
                *next = next.saturating_add(1);
                marker
            }
            _ => "- ".to_owned(),
        }
    }

    fn image(&mut self, tag: &Tag) {
        let alt = attr(tag, "alt")
            .map(|a| a.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let src = attr(tag, "src").filter(|s| shown_href(s) && !s.starts_with("data:"));
        match src {
            Some(src) if self.markdown() => {
                self.writer.lead("![");
                self.writer.append(&alt);
                self.writer.append("](");
                self.writer.append(&link_target(&src));
                self.writer.append(")");
            }
            _ => self.writer.text(&alt),
        }
    }

    /// An element ends: its closing markup.
    fn close(&mut self, role: Role) {
        let markdown = self.markdown();
        let w = &mut self.writer;
        match role {
            Role::Inline => {}
            Role::Block(lines) => w.block(lines),
            Role::Heading { at } => {
                if w.position() == at {
                    w.drop_marker();
                }
                w.block(2);
            }
            Role::List { lines, .. } => w.block(lines),
            Role::Item { prefix, at } => {
                if w.position() == at {
                    w.drop_marker();
                }
                w.pop_prefix(prefix);
                w.block(1);
            }
            Role::Indented { prefix, lines } => {
                w.pop_prefix(prefix);
                w.block(lines);
            }
            Role::Pre => {
                self.pre = self.pre.saturating_sub(1);
                if markdown && self.pre == 0 {
                    w.line("```");
                }
                w.block(2);
            }
            Role::Delimited { at, markup } => {
                w.close_inline(at, markup);
            }
            Role::Link { at, href } => {
                if markdown {
                    if w.close_inline(at, "](") {
                        w.append(&link_target(&href));
                        w.append(")");
                    }
                } else if w.position() != at {
                    w.append(" (");
                    w.append(&href);
                    w.append(")");
                }
            }
            Role::Table => {
                self.tables.pop();
                w.block(2);
            }
            Role::Row { cells } => {
                if cells > 0 && markdown {
                    w.append(" |");
                    if let Some(table) = self.tables.last_mut()
                        && !table.separated
                    {
                        table.separated = true;
                        w.line(&format!("|{}", " --- |".repeat(cells)));
                    }
                }
                w.block(1);
            }
            Role::Cell => w.leave_cell(),
        }
    }
}

/// A link worth showing: not empty, not script.
fn shown_href(href: &str) -> bool {
    !href.is_empty()
        && !href
            .get(..11)
            .is_some_and(|s| s.eq_ignore_ascii_case("javascript:"))
}

/// A target markdown reads whole: in angle brackets when it holds spaces or parentheses.
fn link_target(href: &str) -> String {
    let href: String = href.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    if href.contains([' ', '(', ')']) {
        format!("<{href}>")
    } else {
        href
    }
}
