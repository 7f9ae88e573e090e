//! Programs that write files (judged by where their path arguments land), machine-level
//! destroyers (`dd`, `mkfs*`, `shutdown`, `kill -1` …) and build/test runners.

use super::ShellClass;
use super::argspec::Arg;
use super::rules::{
    ReadFrom, RuleCtx, Verdict, has_flag, has_inline_value, literals, option_value, positionals,
};
use super::words::Word;

/// Programs whose path arguments are written; judged inside/outside by the caller.
pub(super) fn writer<'a>(
    name: &str,
    args: &'a [Word],
    ctx: &RuleCtx,
    scope: &str,
) -> Option<Verdict<'a>> {
    let benign = |why: &str, targets: Vec<&'a Word>| {
        Some(Verdict::new(ShellClass::Benign, scope, why.to_owned()).writing(targets))
    };
    let fed = ctx.xargs || ctx.find_exec;
    let deleter = matches!(name, "rm" | "unlink" | "shred" | "rmdir");
    if fed && deleter {
        let why = "deletes paths supplied by xargs/find";
        return Some(Verdict::new(ShellClass::Destructive, scope, why));
    }
    let known = matches!(
        name,
        "rm" | "rmdir"
            | "unlink"
            | "touch"
            | "mkdir"
            | "cp"
            | "mv"
            | "install"
            | "ln"
            | "tee"
            | "chmod"
            | "chown"
            | "chgrp"
            | "mkfifo"
            | "mknod"
            | "rsync"
            | "tar"
            | "unzip"
            | "zip"
            | "gzip"
            | "gunzip"
            | "bzip2"
            | "bunzip2"
            | "xz"
            | "unxz"
            | "zstd"
    );
    if fed && known {
        return Some(Verdict::new(
            ShellClass::Unknown,
            scope,
            "writes paths supplied by xargs/find",
        ));
    }
    match name {
        "rm" => {
            if has_flag(args, &['r', 'R'], &["--recursive"]) {
                let targets = positionals(args, &[]);
                Some(
                    Verdict::new(ShellClass::Destructive, scope, "recursive delete")
                        .writing(targets),
                )
            } else {
                benign("deletes files", positionals(args, &[]))
            }
        }
        "rmdir" | "unlink" | "mkfifo" => benign("writes files", positionals(args, &["-m"])),
        "touch" => benign("touches files", positionals(args, &["-d", "-r", "-t"])),
        "mkdir" => benign("creates directories", positionals(args, &["-m"])),
        "mknod" => benign(
            "creates a node",
            positionals(args, &["-m"]).into_iter().take(1).collect(),
        ),
        "tee" => {
            let files = positionals(args, &[]);
            if files.is_empty() {
                Some(Verdict::new(
                    ShellClass::ReadOnly,
                    scope,
                    "copies stdin to stdout",
                ))
            } else {
                benign("writes files", files)
            }
        }
        "cp" | "mv" | "install" => Some(with_sources(copy_like(name, args, scope), args)),
        "ln" => Some(copy_like(name, args, scope)),
        "chmod" | "chown" | "chgrp" => {
            // A chmod mode may look like an option (`-x`).
            let is_mode = |w: &&Word| {
                w.text().is_some_and(|t| {
                    name == "chmod"
                        && t.len() > 1
                        && t.starts_with('-')
                        && t[1..].chars().all(|c| "rwxXst".contains(c))
                })
            };
            let mut words: Vec<&Word> = Vec::new();
            let mut past_options = false;
            for w in args {
                match w.text() {
                    Some("--") if !past_options => past_options = true,
                    Some(t) if !past_options && t.starts_with('-') && !is_mode(&w) => {}
                    _ => words.push(w),
                }
            }
            let reference = has_flag(args, &[], &["--reference"]);
            let files: Vec<&Word> = if reference {
                words
            } else {
                words.into_iter().skip(1).collect()
            };
            if has_flag(args, &['R'], &["--recursive"]) {
                let why = "recursive permission change";
                return Some(Verdict::new(ShellClass::Destructive, scope, why).writing(files));
            }
            benign("changes permissions", files)
        }
        "rsync" => {
            let files = positionals(
                args,
                &["-e", "--rsh", "-f", "--filter", "--exclude", "--include"],
            );
            if has_flag(
                args,
                &[],
                &[
                    "--delete",
                    "--delete-before",
                    "--delete-after",
                    "--delete-during",
                    "--delete-excluded",
                    "--remove-source-files",
                ],
            ) {
                // Every operand may lose files: judge them all for outside writes too, so a
                // session grant of `rsync` never covers deleting outside the workspace.
                return Some(
                    Verdict::new(ShellClass::Destructive, scope, "deletes files").writing(files),
                );
            }
            match files.last() {
                Some(dest) if dest.text().is_some_and(is_remote) => Some(Verdict::new(
                    ShellClass::Unknown,
                    scope,
                    "copies to a remote host",
                )),
                Some(dest) => {
                    let sources = files[..files.len() - 1]
                        .iter()
                        .filter(|w| !w.text().is_some_and(is_remote))
                        .map(|w| ReadFrom::Arg(Arg::Word(w)));
                    let mut v = Verdict::new(ShellClass::Benign, scope, "copies files")
                        .writing([*dest])
                        .reading(sources);
                    v.recursive = true;
                    Some(v)
                }
                None => Some(Verdict::new(ShellClass::Unknown, scope, "no destination")),
            }
        }
        "tar" => Some(super::tar::classify(args, scope)),
        "unzip" => {
            if has_flag(args, &['l', 'v', 't', 'Z'], &[]) {
                return Some(Verdict::new(
                    ShellClass::ReadOnly,
                    scope,
                    "lists an archive",
                ));
            }
            let dir = option_value(args, &["-d"], &[]);
            Some(Verdict::new(ShellClass::Benign, scope, "extracts an archive").writing(dir))
        }
        "zip" => benign(
            "writes an archive",
            positionals(args, &["-b", "-n", "-t", "-x", "-i"])
                .into_iter()
                .take(1)
                .collect(),
        ),
        "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "zstd" => {
            if has_flag(
                args,
                &['c', 'l', 't'],
                &["--stdout", "--to-stdout", "--list", "--test"],
            ) {
                Some(Verdict::new(
                    ShellClass::ReadOnly,
                    scope,
                    "writes to stdout",
                ))
            } else {
                benign("replaces files", positionals(args, &["-S", "--suffix"]))
            }
        }
        _ => None,
    }
}

/// The options of `cp`/`mv`/`install`/`ln` that take a value (not file operands).
const COPY_VALUED_OPTIONS: &[&str] = &[
    "-t",
    "--target-directory",
    "-S",
    "--suffix",
    "-m",
    "--mode",
    "-o",
    "--owner",
    "-g",
    "--group",
];

/// The sources of `cp`/`mv`/`install` are read: copying `~/.ssh/id_rsa` into the workspace
/// reads it like `cat` would.
fn with_sources<'a>(v: Verdict<'a>, args: &'a [Word]) -> Verdict<'a> {
    let files = positionals(args, COPY_VALUED_OPTIONS);
    let to_dir = option_value(args, &["-t"], &["--target-directory"]).is_some();
    let sources = if to_dir {
        &files[..]
    } else {
        files.split_last().map_or(&[][..], |(_, s)| s)
    };
    let reads: Vec<ReadFrom<'a>> = sources
        .iter()
        .map(|w| ReadFrom::Arg(Arg::Word(w)))
        .collect();
    let mut v = v.reading(reads);
    v.recursive = has_flag(args, &['r', 'R', 'a'], &["--recursive", "--archive"]);
    v
}

/// `host:path` (not `./a:b`, not `/a:b`).
fn is_remote(text: &str) -> bool {
    match text.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        None => false,
    }
}

fn copy_like<'a>(name: &str, args: &'a [Word], scope: &str) -> Verdict<'a> {
    let files = positionals(args, COPY_VALUED_OPTIONS);
    if let Some(dir) = option_value(args, &["-t"], &["--target-directory"]) {
        let mut targets = vec![dir];
        if name == "mv" {
            targets.extend(files.iter().copied());
        }
        let mut v =
            Verdict::new(ShellClass::Benign, scope, "copies into a directory").writing(targets);
        if name == "ln" {
            v.links = files;
        }
        return v;
    }
    if has_inline_value(args, &["-t"], &["--target-directory"])
        || args
            .iter()
            .filter_map(Word::text)
            .any(|t| !t.starts_with("--") && t.starts_with('-') && t.contains('t') && name != "ln")
    {
        return Verdict::new(ShellClass::Unknown, scope, "target directory not resolved");
    }
    let targets: Vec<&Word> = match name {
        // Moving takes the sources away too.
        "mv" => files.clone(),
        // `ln TARGET` links it into the working directory under its own name.
        "ln" if files.len() == 1 => {
            let mut v = Verdict::new(ShellClass::Benign, scope, "creates a link");
            v.writes.push(super::rules::WriteTo::Cwd);
            v.links = files;
            return v;
        }
        _ => files.last().copied().into_iter().collect(),
    };
    let why = match name {
        "mv" => "moves files",
        "ln" => "creates a link",
        _ => "copies files",
    };
    let mut v = Verdict::new(ShellClass::Benign, scope, why).writing(targets);
    if name == "ln" {
        v.links = files
            .split_last()
            .map(|(_, s)| s.to_vec())
            .unwrap_or_default();
    }
    v
}

/// Machine-level programs.
pub(super) fn system<'a>(name: &str, args: &'a [Word], scope: &str) -> Option<Verdict<'a>> {
    let destructive =
        |why: &str| Some(Verdict::new(ShellClass::Destructive, scope, why.to_owned()));
    match name {
        "dd" => destructive("writes raw blocks"),
        "shred" => destructive("overwrites files"),
        "truncate" => destructive("truncates files"),
        "shutdown" | "reboot" | "poweroff" | "halt" | "telinit" | "init" => {
            destructive("stops the machine")
        }
        "fdisk" | "sfdisk" | "gdisk" | "parted" | "wipefs" | "mkswap" | "swapoff"
        | "blkdiscard" => destructive("rewrites a disk"),
        n if n.starts_with("mkfs") => destructive("formats a file system"),
        "kill" => {
            let lits = literals(args).unwrap_or_default();
            if lits.iter().any(|t| matches!(*t, "-l" | "-L")) {
                return Some(Verdict::new(ShellClass::ReadOnly, scope, "lists signals"));
            }
            // The first word may be the signal (`-9`, `-KILL`); after it, `-1` means every process.
            let pids = lits.iter().skip(usize::from(
                lits.first().is_some_and(|t| t.starts_with('-')),
            ));
            if pids.clone().any(|t| *t == "-1" || *t == "0") {
                destructive("signals every process")
            } else {
                Some(Verdict::new(
                    ShellClass::Unknown,
                    scope,
                    "signals processes",
                ))
            }
        }
        _ => None,
    }
}

/// Build, test and lint runners: benign (they write into the working directory).
pub(super) fn runner<'a>(name: &str, args: &'a [Word], scope: &str) -> Option<Verdict<'a>> {
    const RUNNERS: &[&str] = &[
        "make",
        "gmake",
        "ninja",
        "cmake",
        "ctest",
        "just",
        "meson",
        "pytest",
        "py.test",
        "tox",
        "nox",
        "mypy",
        "ruff",
        "black",
        "isort",
        "flake8",
        "pylint",
        "eslint",
        "prettier",
        "tsc",
        "jest",
        "vitest",
        "mocha",
        "rustfmt",
        "gofmt",
        "rustc",
        "gcc",
        "g++",
        "cc",
        "c++",
        "clang",
        "clang++",
        "javac",
        "mvn",
        "gradle",
        "golangci-lint",
        "cargo-nextest",
    ];
    if !RUNNERS.contains(&name) {
        return None;
    }
    let lits = literals(args).unwrap_or_default();
    if matches!(name, "make" | "gmake" | "ninja")
        && lits.iter().any(|t| matches!(*t, "install" | "uninstall"))
    {
        return Some(Verdict::new(
            ShellClass::Unknown,
            scope,
            "installs into the system",
        ));
    }
    if name == "cmake" && lits.contains(&"--install") {
        return Some(Verdict::new(
            ShellClass::Unknown,
            scope,
            "installs into the system",
        ));
    }
    Some(Verdict::new(ShellClass::Benign, scope, "build/test tool"))
}
