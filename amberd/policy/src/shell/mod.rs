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
//! walks it (cwd tracking for `cd`, pipelines, substitutions, combining) into an
//! [`outcome::Acc`]; [`wrappers`] unwraps `sudo`/`env`/`timeout`/`xargs`/`bash -c`…, and
//! [`launchers`] `flock`/`ionice`/`chroot`/`setpriv`/`env -S`…;
//! [`rules`], [`readers`], [`writers`], [`git`], [`tar`], [`find`], [`tools`] and [`dirs`]
//! hold the per-program rules, [`argspec`] reads arguments against the option tables of
//! [`reader_specs`] and [`git_options`] (unknown options are unknown);
//! [`scope`] names approval scopes; [`sed`] checks sed scripts; [`paths`] decides
//! inside/outside the workspace and protected paths; [`render`] turns every invoked program
//! into a command line for rule matching.
//!
//! **Classification never panics and never touches the file system**: anything it cannot
//! see through (parse errors, computed command names, shells reading stdin, unresolvable
//! write targets, too-deep nesting) is [`ShellClass::Unknown`], which asks in `write` mode.
//! Unresolvable write targets are also flagged (`unresolved_write`): the engine treats them
//! like writes outside the workspace. What commands read is listed (`reads`) for the engine
//! to judge like the file tools' paths (outside the workspace, secret locations). A command mentioning `CDPATH` makes every relative
//! `cd` land in an unknown directory; `cd -`, `pushd` and `popd` do too.

mod argspec;
mod dirs;
mod find;
mod git;
mod git_config;
mod git_options;
mod launchers;
mod outcome;
mod parse;
mod paths;
mod reader_specs;
mod readers;
mod render;
mod rules;
mod scope;
mod sed;
mod tar;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_options;
#[cfg(test)]
mod tests_scopes;
#[cfg(test)]
mod tests_unresolved;
#[cfg(test)]
mod tests_write_targets;
mod tools;
mod words;
mod wrappers;
mod writers;

use std::path::{Path, PathBuf};

pub(crate) use outcome::{Classification, Read, ReadPath, ShellClass};
pub(crate) use render::CommandLine;

use outcome::Acc;

use parse::{Command, Item, Script, SimpleCommand};
use paths::{Cwd, Target};
use rules::{CdTo, Dispatch, ReadFrom, RuleCtx, WriteTo};
use words::Word;

/// Classifies `command` as run by bash in `cwd`, for a session rooted at `workspace`.
/// Pure and lexical: paths are resolved against `cwd` without touching the file system.
pub(crate) fn classify(command: &str, workspace: &Path, cwd: &Path) -> Classification {
    let mut walker = Walker {
        workspace: paths::normalize(workspace),
        acc: Acc::default(),
        // `cd dir` searches CDPATH first: once the command may set it, a relative `cd`
        // can land anywhere.
        cdpath: command.contains("CDPATH"),
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
            Err(e) => {
                walker.acc.incomplete = true;
                walker
                    .acc
                    .note(ShellClass::Unknown, format!("cannot parse: {e}"));
            }
        }
    }
    walker.acc.finish()
}

const DOWNLOADERS: &[&str] = &["curl", "wget"];
/// Longest chain of wrappers (`nice timeout env …`) followed.
const MAX_WRAPPERS: usize = 16;

struct Walker {
    workspace: PathBuf,
    acc: Acc,
    cdpath: bool,
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
            Command::Opaque(why) => self.acc.opaque(why.clone()),
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
            self.acc.opaque("too many nested wrappers".to_owned());
            return;
        }
        let Some(name) = head.literal.as_deref() else {
            self.acc.scope(head.raw.clone());
            self.acc.command(argv, false);
            self.acc
                .opaque(format!("{}: command name is computed", head.raw));
            return;
        };
        match rules::dispatch(name, args, ctx) {
            Dispatch::Wrapper(wrap) => {
                self.acc.command(argv, wrap.class == ShellClass::ReadOnly);
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
            Dispatch::Script { program, source } => {
                // The shell itself only runs the script, whose commands are recorded too.
                self.acc.command(argv, true);
                match parse::parse_script(&source, depth + 1) {
                    // `eval` runs in this shell (its `cd` sticks); `bash -c` in a child.
                    Ok(script) if program == "eval" => self.script(&script, cwd, depth + 1),
                    Ok(script) => self.script(&script, &mut cwd.clone(), depth + 1),
                    Err(e) => self
                        .acc
                        .opaque(format!("{program}: cannot parse inner script: {e}")),
                }
            }
            Dispatch::Leaf(verdict) => {
                self.acc
                    .command(argv, verdict.class == ShellClass::ReadOnly);
                if DOWNLOADERS.contains(&verdict.scope.as_str()) {
                    self.acc.downloads += 1;
                }
                if verdict.class == ShellClass::ReadOnly && verdict.execs.is_empty() {
                    self.acc.read_only_scope(verdict.scope.clone());
                } else {
                    self.acc.scope(verdict.scope.clone());
                }
                if verdict.opaque {
                    self.acc.opaque(verdict.reason.clone());
                }
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
                for source in &verdict.links {
                    self.link(&verdict.scope, source, cwd);
                }
                for read in &verdict.reads {
                    self.read(&verdict.scope, read, cwd, verdict.recursive);
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
            CdTo::Home => Cwd::Home(PathBuf::new()),
            CdTo::Unknown => Cwd::Unknown,
            CdTo::Word(word) if self.cdpath && !paths::anchored(word) => Cwd::Unknown,
            CdTo::Word(word) => paths::change_dir(cwd, word),
        }
    }

    /// Judges one write: inside is fine, outside is destructive, unresolvable is unknown.
    fn write(&mut self, program: &str, target: &WriteTo<'_>, cwd: &Cwd) {
        let ((verdict, path), shown) = match target {
            WriteTo::Cwd => (
                paths::cwd_target(cwd, &self.workspace),
                "its working directory",
            ),
            WriteTo::Word(word) => (
                paths::write_target(word, cwd, &self.workspace),
                word.raw.as_str(),
            ),
            WriteTo::Literal(text) => (paths::resolve(text, cwd, &self.workspace), text.as_str()),
        };
        self.acc.writes.extend(path);
        match verdict {
            Target::Inside | Target::Harmless => {}
            Target::Protected => self.protected(program, shown),
            Target::Outside => {
                self.acc.outside = true;
                self.acc.note(
                    ShellClass::Destructive,
                    format!("{program}: writes {shown} outside the workspace"),
                );
            }
            Target::Unresolved => {
                self.acc.unresolved = true;
                self.acc.note(
                    ShellClass::Unknown,
                    format!("{program}: writes {shown}, which cannot be resolved"),
                );
            }
        }
    }

    /// Records one read, named as far as the working directory is known.
    fn read(&mut self, program: &str, from: &ReadFrom<'_>, cwd: &Cwd, recursive: bool) {
        let (path, shown) = match from {
            ReadFrom::Cwd => (paths::read_cwd(cwd), "its working directory".to_owned()),
            ReadFrom::Arg(arg) => (paths::read_target(arg, cwd), arg.shown().to_owned()),
            ReadFrom::Unknown(why) => (Some(outcome::ReadPath::Unknown), (*why).to_owned()),
        };
        let Some(path) = path else { return };
        let read = outcome::Read {
            path,
            recursive,
            shown: format!("{program}: {shown}"),
        };
        if !self.acc.reads.contains(&read) {
            self.acc.reads.push(read);
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
            let (verdict, path) = paths::write_target(&redirection.target, cwd, &self.workspace);
            self.acc.writes.extend(path);
            let shown = &redirection.target.raw;
            match verdict {
                Target::Harmless => {}
                Target::Protected => self.protected(label, shown),
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
                Target::Unresolved => {
                    self.acc.unresolved = true;
                    self.acc.note(
                        ShellClass::Unknown,
                        format!("{label}: redirection target {shown} cannot be resolved"),
                    );
                }
            }
        } else {
            if redirection.read {
                let arg = argspec::Arg::Word(&redirection.target);
                self.read(label, &ReadFrom::Arg(arg), cwd, false);
            }
            if downloads {
                ctx.stdin_download = true;
            }
        }
    }

    fn protected(&mut self, program: &str, shown: &str) {
        self.acc.protected = true;
        self.acc.note(
            ShellClass::Destructive,
            format!(
                "{program}: writes {shown}, a protected path (amber rules, git hooks or config)"
            ),
        );
    }

    /// A link whose target leaves the workspace: writes through it would too.
    fn link(&mut self, program: &str, source: &Word, cwd: &Cwd) {
        let (target, _) = paths::write_target(source, cwd, &self.workspace);
        match target {
            Target::Inside | Target::Harmless => {}
            Target::Protected => self.protected(program, &source.raw),
            Target::Outside => self.acc.note(
                ShellClass::Unknown,
                format!(
                    "{program}: links to {}, outside the workspace (writes through the link would leave it)",
                    source.raw
                ),
            ),
            Target::Unresolved => self.acc.note(
                ShellClass::Unknown,
                format!("{program}: link target {} cannot be resolved", source.raw),
            ),
        }
    }

    /// Classifies what runs while a word is expanded (`$(…)`, backticks, `<(…)`).
    /// Returns whether one of those inner commands downloads (curl, wget).
    fn word(&mut self, word: &Word, cwd: &Cwd, depth: usize) -> bool {
        if let Some(why) = &word.opaque {
            self.acc.opaque(format!("{}: {why}", word.raw));
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
