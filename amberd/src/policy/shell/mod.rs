//! `shell_classify`: decides how dangerous a bash command is, for the approval policy.
//!
//! The command is parsed with a real shell parser, [`brush_parser`] (the parser of the
//! brush shell), chosen over the alternatives because it is:
//! - maintained (brush is an active bash-compatible shell; the parser is its front end),
//!   MIT-licensed, and pure Rust — no C toolchain, about 20 s cold on a 2-core machine
//!   (version 0.3; 0.4 pulls `insta`/`pest`/`stacker` in as normal dependencies, ~50 s);
//! - a typed bash AST that covers everything classification needs: pipelines, `&&`/`||`/`;`,
//!   subshells, brace groups, if/for/while/case, functions, `[[ ]]`, every redirection form
//!   (`>`, `>>`, `2>`, `&>`, `<`, `<>`, here-docs, here-strings, process substitution), env
//!   assignments, plus a word parser that splits quoting, `$(…)`, backticks, `${…}` and
//!   brace expansion, so inner commands can be classified too.
//!
//! Rejected: `tree-sitter-bash` (what codex uses: a C grammar built with `cc`, an untyped CST
//! that is error-tolerant, so quoting and unquoting would be ours to write), `yash-syntax`
//! (GPL-3.0, POSIX only, async API), `conch-parser` (unmaintained since 2017).
//!
//! Layout: [`parse`] adapts brush's AST into a small IR (`Script` → pipelines →
//! `SimpleCommand { assignments, argv, redirections }`) and [`words`] its words; this file
//! walks it (cwd tracking for `cd`, pipelines, substitutions, combining); [`wrappers`]
//! unwraps `sudo`/`env`/`timeout`/`xargs`/`bash -c`…; [`rules`], [`writers`], [`git`] and
//! [`tools`] hold the per-program tables; [`scope`] names approval scopes; [`sed`] checks sed scripts; [`paths`] decides
//! inside/outside the workspace.
//!
//! **Classification never panics and never touches the file system**: anything it cannot
//! see through (parse errors, computed command names, unresolvable write targets, too-deep
//! nesting) is [`ShellClass::Unknown`], which asks in `write` mode.

mod git;
mod parse;
mod paths;
mod rules;
mod scope;
mod sed;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_scopes;
mod tools;
mod words;
mod wrappers;
mod writers;

use std::path::{Path, PathBuf};

use parse::{Command, Item, Script, SimpleCommand};
use paths::{Cwd, Target};
use rules::{CdTo, Dispatch, RuleCtx, WriteTo};
use words::Word;

/// How dangerous a command is. Ordered by severity; a command takes its worst part.
///
/// `Unknown` ranks below `Destructive`: a part known to be destructive dominates a part
/// that is merely not understood (`sudo foo`, `curl … | sh` are destructive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShellClass {
    /// Every part only reads (known-safe programs, no writing redirection).
    #[default]
    ReadOnly,
    /// Writes that stay inside the workspace, builds and tests, local git operations.
    Benign,
    /// Not understood: asks in `write` mode.
    Unknown,
    /// Deletes recursively, rewrites history, publishes, escalates, or writes outside the workspace.
    Destructive,
}

impl ShellClass {
    /// Lower-case name, for logs and approval prompts.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Benign => "benign",
            Self::Unknown => "unknown",
            Self::Destructive => "destructive",
        }
    }
}

impl std::fmt::Display for ShellClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one bash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub class: ShellClass,
    /// Human-readable: which part decided the class, and why.
    pub reason: String,
    /// Approval scopes, one per invoked program (`rm`, `git push`, `cargo publish`):
    /// deduplicated, in order of appearance. Transparent wrappers (`env`, `timeout`,
    /// `xargs`, `bash -c` …) add none; `sudo` adds `sudo`.
    pub scopes: Vec<String>,
    /// Some write (redirection target, path argument of a known writer, the working
    /// directory of a building tool) resolves outside the workspace.
    pub outside_workspace: bool,
}

/// Classifies `command` as run by bash in `cwd`, for a session rooted at `workspace`.
/// Pure and lexical: paths are resolved against `cwd` without touching the file system.
pub fn classify(command: &str, workspace: &Path, cwd: &Path) -> Classification {
    let mut walker = Walker {
        workspace: paths::normalize(workspace),
        acc: Acc::default(),
    };
    if command.trim().is_empty() {
        walker
            .acc
            .note(ShellClass::Unknown, "empty command".to_owned());
    } else {
        match parse::parse_script(command, 0) {
            Ok(script) => {
                let mut cwd = Cwd::Known(paths::normalize(cwd));
                walker.script(&script, &mut cwd, 0);
            }
            Err(e) => walker
                .acc
                .note(ShellClass::Unknown, format!("cannot parse: {e}")),
        }
    }
    walker.acc.finish()
}

/// Running result: worst class so far with its reasons, scopes, outside flag.
#[derive(Default)]
struct Acc {
    class: ShellClass,
    reasons: Vec<String>,
    scopes: Vec<String>,
    outside: bool,
    /// How many downloading programs (curl, wget) were invoked so far.
    downloads: usize,
}

const MAX_REASONS: usize = 4;

impl Acc {
    fn note(&mut self, class: ShellClass, reason: String) {
        if class > self.class {
            self.class = class;
            self.reasons.clear();
        }
        if class == self.class && !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }

    fn scope(&mut self, scope: String) {
        if !self.scopes.contains(&scope) {
            self.scopes.push(scope);
        }
    }

    fn finish(self) -> Classification {
        let mut reason = self
            .reasons
            .iter()
            .take(MAX_REASONS)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if self.reasons.len() > MAX_REASONS {
            reason.push_str("; …");
        }
        if reason.is_empty() {
            reason = "no commands".to_owned();
        }
        Classification {
            class: self.class,
            reason,
            scopes: self.scopes,
            outside_workspace: self.outside,
        }
    }
}

const DOWNLOADERS: &[&str] = &["curl", "wget"];
/// Longest chain of wrappers (`nice timeout env …`) followed.
const MAX_WRAPPERS: usize = 16;

struct Walker {
    workspace: PathBuf,
    acc: Acc,
}

impl Walker {
    fn script(&mut self, script: &Script, cwd: &mut Cwd, depth: usize) {
        for item in &script.items {
            self.item(item, cwd, depth);
        }
    }

    fn item(&mut self, item: &Item, cwd: &mut Cwd, depth: usize) {
        if let [only] = item.pipeline.as_slice() {
            self.command(only, cwd, RuleCtx::default(), depth);
            return;
        }
        // Every element of a multi-command pipeline runs in its own subshell.
        let mut downloaded = false;
        for command in &item.pipeline {
            let ctx = RuleCtx {
                stdin_download: downloaded,
                ..RuleCtx::default()
            };
            let before = self.acc.downloads;
            self.command(command, &mut cwd.clone(), ctx, depth);
            downloaded |= self.acc.downloads > before;
        }
    }

    fn command(&mut self, command: &Command, cwd: &mut Cwd, ctx: RuleCtx, depth: usize) {
        match command {
            Command::Simple(simple) => self.simple(simple, cwd, ctx, depth),
            Command::Group(group) => {
                for word in &group.words {
                    self.word(word, cwd, depth);
                }
                let mut ctx = ctx;
                for redirection in &group.redirections {
                    self.redirection(redirection, "group", cwd, &mut ctx, depth);
                }
                if group.subshell {
                    self.script(&group.body, &mut cwd.clone(), depth);
                } else {
                    self.script(&group.body, cwd, depth);
                }
            }
            Command::Opaque(why) => self.acc.note(ShellClass::Unknown, why.clone()),
        }
    }

    fn simple(&mut self, simple: &SimpleCommand, cwd: &mut Cwd, ctx: RuleCtx, depth: usize) {
        let mut ctx = ctx;
        for assignment in &simple.assignments {
            if rules::dangerous_env(&assignment.name) {
                self.acc.note(
                    ShellClass::Unknown,
                    format!("sets {} (changes what later commands run)", assignment.name),
                );
            }
            for word in &assignment.value {
                self.word(word, cwd, depth);
            }
        }
        let label = simple
            .argv
            .first()
            .and_then(Word::text)
            .map_or("assignment", rules::program_name);
        for redirection in &simple.redirections {
            self.redirection(redirection, label, cwd, &mut ctx, depth);
        }
        for word in &simple.argv {
            ctx.args_download |= self.word(word, cwd, depth);
        }
        if simple.argv.is_empty() && simple.assignments.is_empty() {
            return; // redirections only (`> file`): already judged
        }
        if simple.argv.is_empty() {
            self.acc
                .note(ShellClass::ReadOnly, "variable assignment".to_owned());
            return;
        }
        self.invoke(&simple.argv, cwd, &ctx, depth);
    }

    /// Judges the program in `argv[0]` with its arguments, unwrapping wrappers.
    fn invoke(&mut self, argv: &[Word], cwd: &mut Cwd, ctx: &RuleCtx, depth: usize) {
        let Some((head, args)) = argv.split_first() else {
            return;
        };
        if ctx.wrapped > MAX_WRAPPERS {
            self.acc
                .note(ShellClass::Unknown, "too many nested wrappers".to_owned());
            return;
        }
        let Some(name) = head.literal.as_deref() else {
            self.acc.scope(head.raw.clone());
            self.acc.note(
                ShellClass::Unknown,
                format!("{}: command name is computed", head.raw),
            );
            return;
        };
        match rules::dispatch(name, args, ctx) {
            Dispatch::Wrapper(wrap) => {
                if let Some(scope) = wrap.scope {
                    self.acc.scope(scope);
                }
                if let Some(reason) = wrap.reason {
                    self.acc.note(wrap.class, reason);
                }
                for target in &wrap.writes {
                    self.write(rules::program_name(name), target, cwd);
                }
                let inner_ctx = RuleCtx {
                    xargs: ctx.xargs || wrap.xargs,
                    wrapped: ctx.wrapped + 1,
                    ..ctx.clone()
                };
                match wrap.cd {
                    Some(to) => {
                        let mut inner_cwd = self.cd(cwd, &to);
                        self.invoke(wrap.inner, &mut inner_cwd, &inner_ctx, depth);
                    }
                    None => self.invoke(wrap.inner, cwd, &inner_ctx, depth),
                }
            }
            Dispatch::Script { program, source } => match parse::parse_script(&source, depth + 1) {
                // `eval` runs in this shell (its `cd` sticks); `bash -c` in a child.
                Ok(script) if program == "eval" => self.script(&script, cwd, depth + 1),
                Ok(script) => self.script(&script, &mut cwd.clone(), depth + 1),
                Err(e) => self.acc.note(
                    ShellClass::Unknown,
                    format!("{program}: cannot parse inner script: {e}"),
                ),
            },
            Dispatch::Leaf(verdict) => {
                if DOWNLOADERS.contains(&verdict.scope.as_str()) {
                    self.acc.downloads += 1;
                }
                self.acc.scope(verdict.scope.clone());
                self.acc.note(verdict.class, verdict.reason.clone());
                if verdict.outside {
                    self.acc.outside = true;
                }
                let implicit = verdict.class == ShellClass::Benign && verdict.writes.is_empty();
                if implicit {
                    self.write(&verdict.scope, &WriteTo::Cwd, cwd);
                }
                for target in &verdict.writes {
                    self.write(&verdict.scope, target, cwd);
                }
                let exec_ctx = RuleCtx {
                    find_exec: true,
                    wrapped: ctx.wrapped + 1,
                    ..ctx.clone()
                };
                for inner in &verdict.execs {
                    self.invoke(inner, &mut cwd.clone(), &exec_ctx, depth);
                }
                if let Some(to) = verdict.cd {
                    *cwd = self.cd(cwd, &to);
                }
            }
        }
    }

    fn cd(&self, cwd: &Cwd, to: &CdTo<'_>) -> Cwd {
        match to {
            CdTo::Home => Cwd::Outside,
            CdTo::Unknown => Cwd::Unknown,
            CdTo::Word(word) => paths::change_dir(cwd, word),
        }
    }

    /// Judges one write: inside is fine, outside is destructive, unresolvable is unknown.
    fn write(&mut self, program: &str, target: &WriteTo<'_>, cwd: &Cwd) {
        let (verdict, shown) = match target {
            WriteTo::Cwd => (
                paths::cwd_target(cwd, &self.workspace),
                "its working directory",
            ),
            WriteTo::Word(word) => (
                paths::write_target(word, cwd, &self.workspace),
                word.raw.as_str(),
            ),
        };
        match verdict {
            Target::Inside | Target::Harmless => {}
            Target::Outside => {
                self.acc.outside = true;
                self.acc.note(
                    ShellClass::Destructive,
                    format!("{program}: writes {shown} outside the workspace"),
                );
            }
            Target::Unresolved => self.acc.note(
                ShellClass::Unknown,
                format!("{program}: writes {shown}, which cannot be resolved"),
            ),
        }
    }

    fn redirection(
        &mut self,
        redirection: &parse::Redirection,
        label: &str,
        cwd: &mut Cwd,
        ctx: &mut RuleCtx,
        depth: usize,
    ) {
        let downloads = self.word(&redirection.target, cwd, depth);
        if redirection.write {
            let verdict = paths::write_target(&redirection.target, cwd, &self.workspace);
            let shown = &redirection.target.raw;
            match verdict {
                Target::Harmless => {}
                Target::Inside => self.acc.note(
                    ShellClass::Benign,
                    format!("{label}: redirection writes {shown}"),
                ),
                Target::Outside => {
                    self.acc.outside = true;
                    self.acc.note(
                        ShellClass::Destructive,
                        format!("{label}: redirection writes {shown} outside the workspace"),
                    );
                }
                Target::Unresolved => self.acc.note(
                    ShellClass::Unknown,
                    format!("{label}: redirection target {shown} cannot be resolved"),
                ),
            }
        } else if downloads {
            ctx.stdin_download = true;
        }
    }

    /// Classifies what runs while a word is expanded (`$(…)`, backticks, `<(…)`).
    /// Returns whether one of those inner commands downloads (curl, wget).
    fn word(&mut self, word: &Word, cwd: &Cwd, depth: usize) -> bool {
        if let Some(why) = &word.opaque {
            self.acc
                .note(ShellClass::Unknown, format!("{}: {why}", word.raw));
        }
        let mut downloads = false;
        for inner in &word.inner {
            let before = self.acc.downloads;
            self.script(inner, &mut cwd.clone(), depth + 1);
            downloads |= self.acc.downloads > before;
        }
        downloads
    }
}
