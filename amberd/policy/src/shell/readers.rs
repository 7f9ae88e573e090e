//! Programs that only read: which of their arguments are paths they read, and which of
//! their options make them run a program or write (then they are not read-only).
//!
//! - programs in [`reader_specs`] are parsed against their option table
//!   ([`super::argspec`]): an option the table does not know is unknown (asks), a
//!   dangerous one (`rg --pre`) unknown with its reason, an output option (`sort -o`)
//!   makes them benign writers of that file; their operands and file options are reads;
//! - [`TEXT`] programs take no paths (`echo`, `printf`, `uname`, shell builtins …): nothing
//!   they are given can make them run a program or open a file, except the few exceptions
//!   checked here (`hash -p`, `export PATH=…`, `shopt -s expand_aliases`, `ps e`);
//! - `find` (start paths, its expression's known primaries), `fd`, `cd`, `date`,
//!   `hostname`, `uniq` are judged by hand.
//!
//! Run by `xargs`, a reader also reads whatever paths come on stdin: an unknown read.

use super::ShellClass;
use super::argspec::{self, Arg, Problem};
use super::reader_specs::{self, Operands, Reader, Recursion};
use super::rules::{CdTo, ReadFrom, RuleCtx, Verdict, WriteTo, dangerous_env, positionals};
use super::words::Word;

/// Programs whose arguments are text, not paths, and cannot make them run anything.
#[rustfmt::skip]
const TEXT: &[&str] = &[
    "echo", "printf", "pwd", "which", "whereis", "type", "true", "false", "test", "[", ":",
    "printenv", "uname", "whoami", "id", "groups", "basename", "dirname", "realpath",
    "readlink", "seq", "sleep", "nproc", "arch", "uptime", "free", "ps", "tty", "locale",
    "getconf", "expr", "export", "set", "unset", "shopt", "local", "declare", "typeset",
    "readonly", "alias", "unalias", "read", "wait", "exit", "return", "break", "continue",
    "shift", "hash", "help", "whatis", "apropos", "dirs", "jobs", "times", "umask", "ulimit",
    "pgrep", "pidof", "lscpu", "lsblk", "cal", "factor", "numfmt", "envsubst", "lsof", "yes",
    "df", "tr",
];

pub(super) fn reader<'a>(
    name: &str,
    args: &'a [Word],
    ctx: &RuleCtx,
    scope: &str,
) -> Option<Verdict<'a>> {
    let ro = |why: &str| Some(Verdict::new(ShellClass::ReadOnly, scope, why.to_owned()));
    let unknown = |why: &str| Some(Verdict::new(ShellClass::Unknown, scope, why.to_owned()));
    if TEXT.contains(&name) {
        return match text_exception(name, args) {
            Some(why) => unknown(&why),
            None => ro("read-only"),
        };
    }
    if let Some(table) = reader_specs::lookup(name) {
        return Some(by_table(table, name, args, ctx, scope));
    }
    match name {
        "cd" => {
            let mut v = Verdict::new(ShellClass::ReadOnly, scope, "changes directory");
            let target = positionals(args, &[]).into_iter().next();
            v.cd = Some(target.map_or(CdTo::Home, CdTo::Word));
            Some(v)
        }
        // The directory stack can hold anything (`pushd +1`, `popd`).
        "pushd" | "popd" => {
            let mut v = Verdict::new(ShellClass::ReadOnly, scope, "changes directory");
            v.cd = Some(CdTo::Unknown);
            Some(v)
        }
        "find" => Some(super::find::classify(args, ctx, scope)),
        "fd" | "fdfind" => Some(super::find::fd(args, ctx, scope)),
        "sed" => Some(fed(super::sed::classify(args, scope), ctx)),
        "uniq" => {
            let files = positionals(args, &["-f", "-s", "-w"]);
            let input = files.first().map(|w| ReadFrom::Arg(Arg::Word(w)));
            match files.get(1) {
                Some(out) => Some(
                    Verdict::new(ShellClass::Benign, scope, "writes its output file")
                        .writing([*out])
                        .reading(input),
                ),
                None => Some(fed(
                    Verdict::new(ShellClass::ReadOnly, scope, "read-only").reading(input),
                    ctx,
                )),
            }
        }
        "date" => {
            if super::rules::has_flag(args, &['s'], &["--set"]) {
                unknown("sets the clock")
            } else {
                let file =
                    super::rules::option_value(args, &["-f", "-r"], &["--file", "--reference"]);
                Some(
                    Verdict::new(ShellClass::ReadOnly, scope, "read-only")
                        .reading(file.map(|w| ReadFrom::Arg(Arg::Word(w)))),
                )
            }
        }
        "hostname" => {
            if positionals(args, &[]).is_empty() {
                ro("read-only")
            } else {
                unknown("sets the host name")
            }
        }
        _ => None,
    }
}

/// Why a text program is not harmless after all, if it is not.
fn text_exception(name: &str, args: &[Word]) -> Option<String> {
    let texts = || args.iter().filter_map(Word::text);
    match name {
        // `hash -p FILE NAME` makes `NAME` run `FILE`.
        "hash" if texts().any(|t| t.starts_with('-') && t.contains('p')) => {
            Some("hash -p changes what a command name runs".to_owned())
        }
        "export" | "declare" | "typeset" | "local" | "readonly" => texts()
            .filter_map(|t| t.split_once('=').map(|(n, _)| n))
            .find(|n| dangerous_env(n))
            .map(|n| format!("sets {n} (changes what later commands run)")),
        "shopt" if texts().any(|t| t == "expand_aliases") => {
            Some("expand_aliases makes aliases run".to_owned())
        }
        // BSD-style `ps e` prints every process's environment (the daemon's included).
        "ps" if args
            .first()
            .and_then(Word::text)
            .is_some_and(|t| !t.starts_with('-') && t.contains('e')) =>
        {
            Some("ps e prints process environments".to_owned())
        }
        _ if args.iter().any(|w| w.text().is_none() && name == "ps") => {
            Some("arguments expand at run time".to_owned())
        }
        _ => None,
    }
}

/// Adds the paths `xargs` feeds a reader: nobody knows them before it runs.
pub(super) fn fed<'a>(mut v: Verdict<'a>, ctx: &RuleCtx) -> Verdict<'a> {
    if ctx.xargs && v.class == ShellClass::ReadOnly {
        v.reads
            .push(ReadFrom::Unknown("paths read from xargs' input"));
    }
    v
}

fn by_table<'a>(
    table: &Reader,
    name: &str,
    args: &'a [Word],
    ctx: &RuleCtx,
    scope: &str,
) -> Verdict<'a> {
    let parsed = match argspec::parse(&table.spec, args) {
        Ok(parsed) => parsed,
        Err(Problem::Danger(why) | Problem::Unknown(why)) => {
            return Verdict::new(ShellClass::Unknown, scope, why);
        }
    };
    let recursive = match table.recursion {
        Recursion::Never => false,
        Recursion::Always => true,
        Recursion::With(options) => parsed.has(options),
    };
    let operands: Vec<&Word> = match table.operands {
        Operands::Files | Operands::FilesOrCwd => parsed.operands.clone(),
        Operands::PatternThen(given) if parsed.has(given) => parsed.operands.clone(),
        Operands::PatternThen(_) | Operands::TextThen => {
            parsed.operands.iter().skip(1).copied().collect()
        }
        Operands::Text if name == "man" && parsed.has(&["-l", "--local-file"]) => {
            parsed.operands.clone()
        }
        Operands::Text => Vec::new(),
    };
    let mut reads: Vec<ReadFrom<'a>> = operands
        .iter()
        // `find -exec grep x {} +`: the found paths, below find's own (judged) paths.
        .filter(|w| !(ctx.find_exec && w.text() == Some("{}")))
        .map(|w| ReadFrom::Arg(Arg::Word(w)))
        .collect();
    let searches_cwd = matches!(table.operands, Operands::FilesOrCwd)
        || (matches!(table.operands, Operands::PatternThen(_)) && recursive);
    if operands.is_empty() && searches_cwd && !ctx.xargs {
        reads.push(ReadFrom::Cwd);
    }
    reads.extend(parsed.reads.iter().cloned().map(ReadFrom::Arg));
    let mut v = if parsed.writes.is_empty() {
        fed(Verdict::new(ShellClass::ReadOnly, scope, "read-only"), ctx)
    } else {
        let mut v = Verdict::new(ShellClass::Benign, scope, "writes its output file");
        v.writes.extend(parsed.writes.iter().map(|a| match a {
            Arg::Word(w) => WriteTo::Word(w),
            Arg::Inline(t) => WriteTo::Literal(t.clone()),
        }));
        v
    };
    v.reads.extend(reads);
    v.recursive = recursive;
    v
}
