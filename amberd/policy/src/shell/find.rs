//! `find` and `fd`: the start paths are recursive reads; `find`'s expression is read
//! primary by primary — `-exec`/`-execdir`/`-ok`/`-okdir` run their command (judged as a
//! command of its own), `-delete` is destructive, `-fprint*`/`-fls` write their file, and a
//! primary this table does not know is unknown. `fd -x`/`-X` run their command.

use super::ShellClass;
use super::argspec::Arg;
use super::rules::{ReadFrom, RuleCtx, Verdict, WriteTo, literals};
use super::words::Word;

/// Primaries and operators that only test or print, with whether they take a value.
#[rustfmt::skip]
const PRIMARIES: &[(&str, bool)] = &[
    ("-name", true), ("-iname", true), ("-path", true), ("-ipath", true), ("-wholename", true),
    ("-iwholename", true), ("-regex", true), ("-iregex", true), ("-regextype", true),
    ("-type", true), ("-xtype", true), ("-size", true), ("-empty", false), ("-mtime", true),
    ("-atime", true), ("-ctime", true), ("-mmin", true), ("-amin", true), ("-cmin", true),
    ("-used", true), ("-user", true), ("-group", true), ("-uid", true), ("-gid", true),
    ("-nouser", false), ("-nogroup", false), ("-perm", true), ("-links", true),
    ("-inum", true), ("-lname", true), ("-ilname", true), ("-readable", false),
    ("-writable", false), ("-executable", false), ("-fstype", true), ("-true", false),
    ("-false", false), ("-maxdepth", true), ("-mindepth", true), ("-depth", false),
    ("-d", false), ("-mount", false), ("-xdev", false), ("-follow", false),
    ("-noleaf", false), ("-ignore_readdir_race", false), ("-noignore_readdir_race", false),
    ("-daystart", false), ("-warn", false), ("-nowarn", false), ("-print", false),
    ("-print0", false), ("-printf", true), ("-ls", false), ("-prune", false), ("-quit", false),
    ("-not", false), ("-and", false), ("-a", false), ("-or", false), ("-o", false),
    ("-help", false), ("-version", false), ("-context", true), ("(", false), (")", false),
    ("!", false), (",", false), ("-H", false), ("-L", false), ("-P", false),
];

/// Primaries whose value is a file that is read (its metadata, or names in it).
const READ_PRIMARIES: &[&str] = &["-newer", "-anewer", "-cnewer", "-samefile", "-files0-from"];

pub(super) fn classify<'a>(args: &'a [Word], ctx: &RuleCtx, scope: &str) -> Verdict<'a> {
    let mut v = Verdict::new(ShellClass::ReadOnly, scope, "read-only");
    v.recursive = true;
    let mut starts = 0;
    let mut in_expression = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let Some(text) = arg.text() else {
            return Verdict::new(ShellClass::Unknown, scope, "arguments expand at run time");
        };
        i += 1;
        if !in_expression && !text.starts_with('-') && !matches!(text, "(" | "!" | ",") {
            if !(ctx.find_exec && text == "{}") {
                v.reads.push(ReadFrom::Arg(Arg::Word(arg)));
            }
            starts += 1;
            continue;
        }
        // Leading `-D debugopts` and `-Olevel` belong to the options, not the expression.
        if !in_expression && starts == 0 && (text == "-D" || text.starts_with("-O")) {
            i += usize::from(text == "-D");
            continue;
        }
        in_expression = true;
        match text {
            "-delete" => {
                return Verdict::new(ShellClass::Destructive, scope, "-delete removes files");
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let rest = args.get(i..).unwrap_or_default();
                let end = rest
                    .iter()
                    .position(|w| matches!(w.text(), Some(";" | "+")))
                    .unwrap_or(rest.len());
                v.execs.push(rest.get(..end).unwrap_or_default());
                v.reason = format!("{scope}: runs a command per match");
                i += end + 1;
            }
            "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                if let Some(file) = args.get(i) {
                    v.writes.push(WriteTo::Word(file));
                }
                i += if text == "-fprintf" { 2 } else { 1 };
                v.class = ShellClass::Benign;
                v.reason = format!("{scope}: {text} writes a file");
            }
            t if READ_PRIMARIES.contains(&t) || t.starts_with("-newer") => {
                if let Some(file) = args.get(i) {
                    v.reads.push(ReadFrom::Arg(Arg::Word(file)));
                }
                i += 1;
            }
            t => match PRIMARIES.iter().find(|(name, _)| *name == t) {
                Some((_, takes_value)) => i += usize::from(*takes_value),
                None => {
                    return Verdict::new(
                        ShellClass::Unknown,
                        scope,
                        format!("unknown primary {t}"),
                    );
                }
            },
        }
    }
    if starts == 0 && !ctx.xargs {
        v.reads.push(ReadFrom::Cwd);
    }
    super::readers::fed(v, ctx)
}

pub(super) fn fd<'a>(args: &'a [Word], ctx: &RuleCtx, scope: &str) -> Verdict<'a> {
    let exec = args
        .iter()
        .position(|a| matches!(a.text(), Some("-x" | "--exec" | "-X" | "--exec-batch")));
    let searched = args.get(..exec.unwrap_or(args.len())).unwrap_or_default();
    if literals(searched).is_none() {
        return Verdict::new(ShellClass::Unknown, scope, "arguments expand at run time");
    }
    let mut v = Verdict::new(ShellClass::ReadOnly, scope, "read-only");
    v.recursive = true;
    // `fd [OPTIONS] [PATTERN] [PATH…]`: the paths after the pattern are searched.
    let valued = [
        "-e",
        "--extension",
        "-t",
        "--type",
        "-d",
        "--max-depth",
        "--min-depth",
        "--exact-depth",
        "-E",
        "--exclude",
        "-S",
        "--size",
        "--changed-within",
        "--changed-before",
        "-o",
        "--owner",
        "-j",
        "--threads",
        "--max-results",
        "-c",
        "--color",
        "--base-directory",
        "--search-path",
        "--ignore-file",
        "--format",
        "--path-separator",
    ];
    let operands = super::rules::positionals(searched, &valued);
    let mut paths: Vec<ReadFrom<'a>> = operands
        .iter()
        .skip(1)
        .map(|w| ReadFrom::Arg(Arg::Word(w)))
        .collect();
    for option in ["--search-path", "--base-directory"] {
        if let Some(dir) = super::rules::option_value(searched, &[], &[option]) {
            paths.push(ReadFrom::Arg(Arg::Word(dir)));
        }
    }
    if paths.is_empty() {
        paths.push(ReadFrom::Cwd);
    }
    v.reads = paths;
    if let Some(i) = exec {
        v.execs.push(args.get(i + 1..).unwrap_or_default());
        v.reason = format!("{scope}: runs a command per match");
    }
    super::readers::fed(v, ctx)
}
