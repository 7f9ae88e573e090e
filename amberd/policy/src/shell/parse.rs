//! Adapter from brush-parser's AST to the small IR the classifier walks: a `Script` is a
//! sequence of pipelines; a pipeline holds simple commands (`assignments`, `argv`,
//! `redirections`) and groups (subshells, brace groups, if/for/while/case bodies, function
//! bodies). Words carry their quote-removed literal value when they have one, and the
//! already-parsed scripts of their `$(…)`, backticks and `<(…)`.
//!
//! Guards, because a stack overflow cannot be caught: input length, bracket nesting and
//! substitution depth are bounded before brush sees the text; text with many compound
//! keywords (a here-document full of `if`s) is parsed on a thread whose stack is sized for
//! it; the IR is nesting-limited; brush's own panics are caught as parse failures.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};

use brush_parser::ast;
use brush_parser::{Parser, SourceInfo};

use super::words::Word;
use super::words::{options, word, words_expanded};

/// Deepest nesting of `$(…)` / `bash -c` inside each other.
pub(super) const MAX_DEPTH: usize = 8;
/// Longest command text accepted.
const MAX_LEN: usize = 64 * 1024;
/// Deepest nesting of compound commands (groups, loops, conditionals) accepted.
const MAX_LEVEL: usize = 32;
/// Deepest `(`/`{` nesting accepted.
const MAX_BRACKETS: usize = 64;
/// Up to this much estimated nesting, parse on the caller's stack (2 MiB is plenty).
const INLINE_NESTING: usize = 64;
/// Stack per estimated nesting level when parsing on a dedicated thread (debug builds use
/// about 14 KiB per `if`/`{` level), and the cap.
const STACK_PER_LEVEL: usize = 32 * 1024;
const MAX_STACK: usize = 256 * 1024 * 1024;

/// Why a command text could not be turned into a script.
#[derive(Debug, thiserror::Error)]
pub(super) enum ParseFailure {
    #[error("nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
    #[error("longer than {MAX_LEN} bytes")]
    TooLong,
    #[error("nesting too deep")]
    TooNested,
    #[error("{0}")]
    Syntax(String),
    #[error("the parser failed on this input")]
    Panicked,
    #[error("no thread for the parser: {0}")]
    Thread(String),
}

#[derive(Debug, Clone, Default)]
pub(super) struct Script {
    /// Pipelines in the order they may run (and-or lists flattened).
    pub items: Vec<Item>,
}

#[derive(Debug, Clone)]
pub(super) struct Item {
    pub pipeline: Vec<Command>,
}

#[derive(Debug, Clone)]
pub(super) enum Command {
    Simple(SimpleCommand),
    Group(Group),
    /// Something whose effect cannot be seen (a substitution inside arithmetic …).
    Opaque(String),
}

#[derive(Debug, Clone)]
pub(super) struct Group {
    pub body: Script,
    /// Runs in a subshell (or is a function body): `cd` inside does not leak out.
    pub subshell: bool,
    /// Words the construct itself expands (`for x in WORDS`, `case WORD`, `[[ … ]]`).
    pub words: Vec<Word>,
    pub redirections: Vec<Redirection>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct SimpleCommand {
    pub assignments: Vec<Assignment>,
    pub argv: Vec<Word>,
    pub redirections: Vec<Redirection>,
}

#[derive(Debug, Clone)]
pub(super) struct Assignment {
    pub name: String,
    pub value: Vec<Word>,
}

#[derive(Debug, Clone)]
pub(super) struct Redirection {
    /// Writes (or truncates) `target`; otherwise only reads it (`<`, here-doc, here-string).
    pub write: bool,
    /// `< file`, `<> file`: the file is read.
    pub read: bool,
    pub target: Word,
}

/// Parses a command text (or an inner script at `depth`) into a [`Script`].
pub(super) fn parse_script(src: &str, depth: usize) -> Result<Script, ParseFailure> {
    if depth > MAX_DEPTH {
        return Err(ParseFailure::TooDeep);
    }
    if src.len() > MAX_LEN {
        return Err(ParseFailure::TooLong);
    }
    let (brackets, keywords) = nesting(src);
    if brackets > MAX_BRACKETS {
        return Err(ParseFailure::TooNested);
    }
    let estimate = brackets + keywords;
    let convert = || {
        let parsed = parse_program(src)?;
        let mut script = Script::default();
        for list in &parsed.complete_commands {
            compound_list(list, At { depth, level: 0 }, &mut script)?;
        }
        Ok(script)
    };
    if estimate <= INLINE_NESTING {
        return convert();
    }
    // brush parses recursively and a stack overflow aborts the process: many compound
    // keywords (often only words in a here-document body) get a thread with a stack sized
    // for them, where the deep AST is also converted (depth-limited) and dropped.
    let stack = (estimate * STACK_PER_LEVEL + 4 * 1024 * 1024).min(MAX_STACK);
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("shell-parse".to_owned())
            .stack_size(stack)
            .spawn_scoped(scope, convert)
            .map_err(|e| ParseFailure::Thread(e.to_string()))?
            .join()
            .map_err(|_| ParseFailure::Panicked)?
    })
}

/// Where the adapter is: substitution depth and compound-command nesting level.
#[derive(Debug, Clone, Copy)]
struct At {
    depth: usize,
    level: usize,
}

impl At {
    fn nested(self) -> Result<Self, ParseFailure> {
        if self.level >= MAX_LEVEL {
            return Err(ParseFailure::TooNested);
        }
        Ok(Self {
            level: self.level + 1,
            ..self
        })
    }

    fn substitution(self) -> Self {
        Self {
            depth: self.depth + 1,
            ..self
        }
    }
}

fn parse_program(src: &str) -> Result<ast::Program, ParseFailure> {
    catch_unwind(AssertUnwindSafe(|| {
        Parser::new(Cursor::new(src), &options(), &SourceInfo::default()).parse_program()
    }))
    .map_err(|_| ParseFailure::Panicked)?
    .map_err(|e| ParseFailure::Syntax(e.to_string()))
}

/// Deepest bracket nesting, and the number of compound keywords: together a cheap upper
/// bound on how deep brush's recursive descent can go.
fn nesting(src: &str) -> (usize, usize) {
    let (mut depth, mut max) = (0usize, 0usize);
    for c in src.chars() {
        match c {
            '(' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let keywords = src
        .split(|c: char| c.is_whitespace() || ";&|()".contains(c))
        .filter(|t| matches!(*t, "if" | "while" | "until" | "for" | "case" | "select"))
        .count();
    (max, keywords)
}

fn compound_list(list: &ast::CompoundList, at: At, out: &mut Script) -> Result<(), ParseFailure> {
    let at = at.nested()?;
    for ast::CompoundListItem(and_or, _separator) in &list.0 {
        out.items.push(pipeline(&and_or.first, at)?);
        for next in &and_or.additional {
            let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
            out.items.push(pipeline(p, at)?);
        }
    }
    Ok(())
}

fn list_script(list: &ast::CompoundList, at: At) -> Result<Script, ParseFailure> {
    let mut script = Script::default();
    compound_list(list, at, &mut script)?;
    Ok(script)
}

fn pipeline(p: &ast::Pipeline, at: At) -> Result<Item, ParseFailure> {
    let pipeline = p
        .seq
        .iter()
        .map(|c| command(c, at))
        .collect::<Result<_, _>>()?;
    Ok(Item { pipeline })
}

fn command(c: &ast::Command, at: At) -> Result<Command, ParseFailure> {
    Ok(match c {
        ast::Command::Simple(simple) => Command::Simple(simple_command(simple, at)?),
        ast::Command::Compound(compound, redirects) => {
            let redirections = redirect_list(redirects.as_ref(), at)?;
            compound_command(compound, redirections, at)?
        }
        ast::Command::Function(f) => {
            let ast::FunctionBody(body, redirects) = &f.body;
            let redirections = redirect_list(redirects.as_ref(), at)?;
            match compound_command(body, redirections, at)? {
                Command::Group(mut group) => {
                    group.subshell = true;
                    Command::Group(group)
                }
                other => other,
            }
        }
        ast::Command::ExtendedTest(test) => {
            let mut raw = Vec::new();
            test_words(&test.expr, &mut raw);
            let words = raw
                .into_iter()
                .map(|w| word(&w.value, at.depth))
                .collect::<Result<_, _>>()?;
            Command::Group(Group {
                body: Script::default(),
                subshell: false,
                words,
                redirections: Vec::new(),
            })
        }
    })
}

fn test_words<'a>(expr: &'a ast::ExtendedTestExpr, out: &mut Vec<&'a ast::Word>) {
    use ast::ExtendedTestExpr as E;
    match expr {
        E::And(a, b) | E::Or(a, b) => {
            test_words(a, out);
            test_words(b, out);
        }
        E::Not(a) | E::Parenthesized(a) => test_words(a, out),
        E::UnaryTest(_, w) => out.push(w),
        E::BinaryTest(_, a, b) => {
            out.push(a);
            out.push(b);
        }
    }
}

fn arithmetic_opaque(text: &str) -> Option<Command> {
    (text.contains("$(") || text.contains('`'))
        .then(|| Command::Opaque("command substitution inside arithmetic".to_owned()))
}

fn compound_command(
    c: &ast::CompoundCommand,
    redirections: Vec<Redirection>,
    at: At,
) -> Result<Command, ParseFailure> {
    use ast::CompoundCommand as C;
    let mut words = Vec::new();
    let mut body = Script::default();
    let mut subshell = false;
    match c {
        C::Arithmetic(a) => {
            if let Some(opaque) = arithmetic_opaque(&a.expr.value) {
                return Ok(opaque);
            }
        }
        C::ArithmeticForClause(f) => {
            for e in [&f.initializer, &f.condition, &f.updater]
                .into_iter()
                .flatten()
            {
                if let Some(opaque) = arithmetic_opaque(&e.value) {
                    return Ok(opaque);
                }
            }
            compound_list(&f.body.list, at, &mut body)?;
        }
        C::BraceGroup(g) => compound_list(&g.list, at, &mut body)?,
        C::Subshell(s) => {
            subshell = true;
            compound_list(&s.list, at, &mut body)?;
        }
        C::ForClause(f) => {
            for w in f.values.iter().flatten() {
                words.extend(words_expanded(&w.value, at.depth)?);
            }
            compound_list(&f.body.list, at, &mut body)?;
        }
        C::CaseClause(case) => {
            words.push(word(&case.value.value, at.depth)?);
            for item in &case.cases {
                for pattern in &item.patterns {
                    words.push(word(&pattern.value, at.depth)?);
                }
                if let Some(cmd) = &item.cmd {
                    compound_list(cmd, at, &mut body)?;
                }
            }
        }
        C::IfClause(i) => {
            compound_list(&i.condition, at, &mut body)?;
            compound_list(&i.then, at, &mut body)?;
            for clause in i.elses.iter().flatten() {
                if let Some(condition) = &clause.condition {
                    compound_list(condition, at, &mut body)?;
                }
                compound_list(&clause.body, at, &mut body)?;
            }
        }
        C::WhileClause(w) | C::UntilClause(w) => {
            compound_list(&w.0, at, &mut body)?;
            compound_list(&w.1.list, at, &mut body)?;
        }
    }
    Ok(Command::Group(Group {
        body,
        subshell,
        words,
        redirections,
    }))
}

fn simple_command(c: &ast::SimpleCommand, at: At) -> Result<SimpleCommand, ParseFailure> {
    let mut out = SimpleCommand::default();
    let prefix = c.prefix.iter().flat_map(|p| p.0.iter()).map(|i| (i, true));
    let suffix = c.suffix.iter().flat_map(|s| s.0.iter()).map(|i| (i, false));
    let mut items: Vec<(&ast::CommandPrefixOrSuffixItem, bool)> = prefix.collect();
    let name = c.word_or_name.as_ref();
    if let Some(name) = name {
        out.argv.extend(words_expanded(&name.value, at.depth)?);
    }
    items.extend(suffix);
    // Declaration builtins really assign their `k=v` arguments.
    let declares = name.is_some_and(|n| {
        matches!(
            n.value.as_str(),
            "export" | "declare" | "typeset" | "local" | "readonly"
        )
    });
    for (item, before_name) in items {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::IoRedirect(r) => out.redirections.extend(redirect(r, at)?),
            I::Word(w) => out.argv.extend(words_expanded(&w.value, at.depth)?),
            // `FOO=1 cmd` sets a variable; `cmd k=v` (`git -c k=v`, `env A=1 x`,
            // `make CC=gcc`) passes an argument that only looks like an assignment.
            I::AssignmentWord(a, _) if before_name || declares || name.is_none() => {
                out.assignments.push(assignment(a, at)?);
            }
            I::AssignmentWord(_, w) => out.argv.extend(words_expanded(&w.value, at.depth)?),
            I::ProcessSubstitution(_, sub) => out.argv.push(process(sub, at)?),
        }
    }
    Ok(out)
}

fn assignment(a: &ast::Assignment, at: At) -> Result<Assignment, ParseFailure> {
    let name = match &a.name {
        ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => {
            n.clone()
        }
    };
    let value = match &a.value {
        ast::AssignmentValue::Scalar(w) => vec![word(&w.value, at.depth)?],
        ast::AssignmentValue::Array(items) => {
            let mut out = Vec::new();
            for (key, value) in items {
                if let Some(key) = key {
                    out.push(word(&key.value, at.depth)?);
                }
                out.push(word(&value.value, at.depth)?);
            }
            out
        }
    };
    Ok(Assignment { name, value })
}

fn process(sub: &ast::SubshellCommand, at: At) -> Result<Word, ParseFailure> {
    if at.depth >= MAX_DEPTH {
        return Err(ParseFailure::TooDeep);
    }
    Ok(Word {
        raw: super::argspec::PROCESS_SUBSTITUTION.to_owned(),
        inner: vec![list_script(&sub.list, at.substitution())?],
        ..Word::default()
    })
}

fn redirect_list(
    list: Option<&ast::RedirectList>,
    at: At,
) -> Result<Vec<Redirection>, ParseFailure> {
    let mut out = Vec::new();
    for r in list.iter().flat_map(|l| l.0.iter()) {
        out.extend(redirect(r, at)?);
    }
    Ok(out)
}

fn redirect(r: &ast::IoRedirect, at: At) -> Result<Vec<Redirection>, ParseFailure> {
    use ast::IoFileRedirectKind as K;
    use ast::IoFileRedirectTarget as T;
    let one = |write: bool, target: Word| {
        Ok(vec![Redirection {
            write,
            read: false,
            target,
        }])
    };
    match r {
        ast::IoRedirect::File(_, kind, target) => {
            let write = matches!(
                kind,
                K::Write | K::Append | K::Clobber | K::ReadAndWrite | K::DuplicateOutput
            );
            let read = matches!(kind, K::Read | K::ReadAndWrite);
            match target {
                T::Fd(_) => Ok(Vec::new()),
                T::ProcessSubstitution(_, sub) => one(false, process(sub, at)?),
                T::Filename(w) => Ok(words_expanded(&w.value, at.depth)?
                    .into_iter()
                    .map(|target| Redirection {
                        write,
                        read,
                        target,
                    })
                    .collect()),
                T::Duplicate(w) => {
                    let target = word(&w.value, at.depth)?;
                    let is_fd = target
                        .text()
                        .is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
                    // `>&file` (not a number) redirects stdout and stderr to `file`.
                    one(write && !is_fd, target)
                }
            }
        }
        ast::IoRedirect::OutputAndError(w, _append) => one(true, word(&w.value, at.depth)?),
        ast::IoRedirect::HereString(_, w) => one(false, word(&w.value, at.depth)?),
        ast::IoRedirect::HereDocument(_, doc) => {
            if !doc.requires_expansion {
                return Ok(Vec::new());
            }
            // An unquoted delimiter expands the body like a double-quoted string.
            let body = &doc.doc.value;
            if !body.contains("$(") && !body.contains('`') && !body.contains("${") {
                return Ok(Vec::new());
            }
            let quoted = format!("\"{}\"", body.replace('"', "\\\""));
            let mut target = word(&quoted, at.depth)?;
            target.raw = "<<here-document".to_owned();
            one(false, target)
        }
    }
}
