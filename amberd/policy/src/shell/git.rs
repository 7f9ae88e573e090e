//! git: subcommand rules.
//!
//! Decisions:
//! - read-only: status, log, diff, show, rev-parse, ls-files, blame, grep, describe …,
//!   `branch`/`tag`/`stash list`/`remote -v`/`config --get` in their listing forms,
//!   `clean -n`. `--output`/`-o` files make them writers.
//! - benign (local and recoverable through the reflog or the remote): add, commit (also
//!   `--amend`), fetch, pull, merge, rebase, cherry-pick, revert, stash (push/pop/apply),
//!   switch, `checkout -b`, creating branches and tags, `branch -d`, `reset` (soft/mixed),
//!   `restore --staged`, `rm` (git refuses to drop unsaved changes without `-f`), clone,
//!   init, gc. They write the repository, so a working directory (or `-C`) outside the
//!   workspace makes them outside writes.
//! - destructive: push (any form), `reset --hard|--merge|--keep`, `clean` (without `-n`),
//!   `checkout -- PATHS`, `checkout .`, `checkout -f`, `checkout REV PATHS`, `restore`
//!   of the worktree, `switch -f`/`--discard-changes`, `branch -D`, `stash drop|clear`,
//!   `rm -f`, `reflog expire|delete`, `filter-branch`, `update-ref`, `config --global`.
//! - unknown: `checkout NAME` with one name (a branch, or a file whose changes it would
//!   discard: use `git switch`), `submodule foreach`, `-c` settings that can run programs,
//!   `git config` setting a key that can run programs (`core.hooksPath`, `core.pager`,
//!   `alias.*`, `filter.*`, `*.command` … see `git_config::runs_programs`) or `--edit`, unlisted
//!   subcommands.
//! - `init DIR`, `init --separate-git-dir DIR`, `clone URL DIR` write `DIR`.

use super::ShellClass;
use super::argspec::{self, Arg, Problem};
use super::rules::{ReadFrom, Verdict, WriteTo, has_flag, literals, option_value, positionals};
use super::scope::subcommand;
use super::words::Word;
use super::{git_config, git_options};

#[rustfmt::skip]
const READ_ONLY: &[&str] = &[
    "status", "log", "diff", "show", "rev-parse", "ls-files", "ls-tree", "ls-remote", "blame",
    "annotate", "shortlog", "describe", "cat-file", "grep", "merge-base", "show-ref",
    "for-each-ref", "count-objects", "rev-list", "name-rev", "check-ignore", "check-attr",
    "whatchanged", "help", "version", "var", "cherry", "range-diff", "verify-commit", "verify-tag",
    "fsck", "show-branch", "diff-tree", "diff-files", "diff-index", "check-ref-format",
];

#[rustfmt::skip]
const BENIGN: &[&str] = &[
    "add", "commit", "fetch", "pull", "merge", "rebase", "cherry-pick", "revert", "init", "mv",
    "apply", "am", "stage", "bisect", "sparse-checkout", "gc", "prune", "repack", "maintenance",
    "format-patch", "archive", "clone", "update-index", "commit-tree", "read-tree", "lfs",
];

pub(super) fn classify<'a>(args: &'a [Word], scope: &str) -> Verdict<'a> {
    let verdict = |class, why: &str| Verdict::new(class, scope, why.to_owned());
    let global = match argspec::parse_head(&git_options::GLOBAL, args) {
        Ok(parsed) => parsed,
        Err(Problem::Danger(why) | Problem::Unknown(why)) => {
            return verdict(ShellClass::Unknown, &why);
        }
    };
    for setting in global.values(&["-c"]) {
        if !setting.text().is_some_and(git_config::harmless_config) {
            return verdict(ShellClass::Unknown, "-c setting may run programs");
        }
    }
    // Where git works: `-C DIR`, `--git-dir`, `--work-tree` (the repository's config is
    // read there, so it is a read), else the working directory.
    let dirs: Vec<&Arg<'a>> = global.values(&["-C", "--git-dir", "--work-tree"]);
    let i = global.first_operand.unwrap_or(args.len());
    let Some(sub) = args.get(i).and_then(Word::text) else {
        return if global.has(&["-v", "-h", "--version", "--help"]) {
            verdict(ShellClass::ReadOnly, "prints version or help")
        } else if global.first_operand.is_none()
            && global.has(&["--html-path", "--man-path", "--info-path", "--list-cmds"])
        {
            verdict(ShellClass::ReadOnly, "prints a path")
        } else {
            verdict(ShellClass::Unknown, "no subcommand")
        };
    };
    let rest = args.get(i + 1..).unwrap_or_default();
    let mut v = subcommand_verdict(sub, rest, scope);
    if v.class == ShellClass::ReadOnly && literals(rest).is_none() {
        v = verdict(ShellClass::Unknown, "arguments expand at run time");
    }
    if v.class != ShellClass::Unknown
        && let Some(why) = git_options::benign_danger(
            sub,
            &literals(rest).unwrap_or_default(),
            subcommand(rest, &[]).map(|(_, s)| s),
        )
    {
        v = verdict(ShellClass::Unknown, &why);
    }
    if dirs.is_empty() {
        v.reads.push(ReadFrom::Cwd);
    }
    v.reads
        .extend(dirs.iter().map(|d| ReadFrom::Arg((*d).clone())));
    if matches!(v.class, ShellClass::Benign | ShellClass::Destructive) {
        v.writes.extend(dirs.iter().map(|d| match d {
            Arg::Word(w) => WriteTo::Word(w),
            Arg::Inline(t) => WriteTo::Literal(t.clone()),
        }));
    }
    v
}

/// A read-only subcommand read against its option table.
fn read_only_options<'a>(sub: &str, rest: &'a [Word], scope: &str) -> Option<Verdict<'a>> {
    let specs = git_options::read_only(sub)?;
    let parsed = match argspec::parse_all(specs, rest) {
        Ok(parsed) => parsed,
        Err(Problem::Danger(why) | Problem::Unknown(why)) => {
            return Some(Verdict::new(ShellClass::Unknown, scope, why));
        }
    };
    let mut v = if parsed.writes.is_empty() {
        Verdict::new(ShellClass::ReadOnly, scope, "read-only")
    } else {
        let mut v = Verdict::new(ShellClass::Benign, scope, "writes its --output file");
        v.writes.extend(parsed.writes.iter().map(|a| match a {
            Arg::Word(w) => WriteTo::Word(w),
            Arg::Inline(t) => WriteTo::Literal(t.clone()),
        }));
        v
    };
    v.reads
        .extend(parsed.reads.iter().cloned().map(ReadFrom::Arg));
    // `--no-index` compares (or searches) any paths, not the repository's.
    if parsed.has(&["--no-index"]) {
        let paths = if sub == "grep" && !parsed.has(&["-e", "-f"]) {
            parsed.operands.get(1..).unwrap_or_default()
        } else {
            &parsed.operands[..]
        };
        v.reads
            .extend(paths.iter().map(|w| ReadFrom::Arg(Arg::Word(w))));
    }
    Some(v)
}

fn subcommand_verdict<'a>(sub: &str, rest: &'a [Word], scope: &str) -> Verdict<'a> {
    use ShellClass::{Benign, Destructive, ReadOnly, Unknown};
    let verdict = |class, why: &str| Verdict::new(class, scope, why.to_owned());
    let flag = |short: &[char], long: &[&str]| has_flag(rest, short, long);
    let sub2 = subcommand(rest, &[]).map(|(_, s)| s);
    match sub {
        "push" => verdict(Destructive, "publishes commits to a remote"),
        "filter-branch" | "filter-repo" | "update-ref" | "replace" => {
            verdict(Destructive, "rewrites refs")
        }
        "reset" if flag(&[], &["--hard", "--merge", "--keep"]) => {
            verdict(Destructive, "discards working-tree changes")
        }
        "reset" => verdict(Benign, "moves HEAD, keeps the working tree"),
        "clean" if flag(&['n'], &["--dry-run"]) => verdict(ReadOnly, "dry run"),
        "clean" => verdict(Destructive, "deletes untracked files"),
        "checkout" => checkout(rest, scope),
        "switch" if flag(&['f'], &["--force", "--discard-changes"]) => {
            verdict(Destructive, "discards working-tree changes")
        }
        "switch" => verdict(Benign, "switches branch"),
        "restore" if flag(&['S'], &["--staged"]) && !flag(&['W'], &["--worktree"]) => {
            verdict(Benign, "unstages")
        }
        "restore" => verdict(Destructive, "discards working-tree changes"),
        "rm" if flag(&['f'], &["--force"]) => verdict(Destructive, "force-removes files"),
        "rm" => verdict(Benign, "removes tracked files"),
        "branch" => branch(rest, scope),
        "tag" => {
            let valued = [
                "-m",
                "-F",
                "-u",
                "--message",
                "--file",
                "--local-user",
                "--sort",
                "--format",
                "--contains",
                "--points-at",
                "--merged",
                "--no-merged",
            ];
            if flag(&['d'], &["--delete"]) {
                verdict(Benign, "deletes a local tag")
            } else if flag(&['l', 'v'], &["--list", "--verify"])
                || positionals(rest, &valued).is_empty()
            {
                verdict(ReadOnly, "lists tags")
            } else {
                verdict(Benign, "creates a tag")
            }
        }
        "stash" if sub2 == Some("show") => {
            let after = subcommand(rest, &[]).map_or(rest, |(i, _)| &rest[i + 1..]);
            read_only_options("stash show", after, scope)
                .unwrap_or_else(|| verdict(Unknown, "stash show"))
        }
        "stash" => match sub2 {
            None | Some("push" | "save" | "pop" | "apply" | "create" | "store" | "branch") => {
                verdict(Benign, "stashes changes")
            }
            Some("list") => verdict(ReadOnly, "lists stashes"),
            Some("drop" | "clear") => verdict(Destructive, "drops stashed changes"),
            Some(_) => verdict(Unknown, "unknown stash subcommand"),
        },
        "remote" => match sub2 {
            None | Some("show" | "get-url") => verdict(ReadOnly, "lists remotes"),
            Some(_) => verdict(Benign, "changes remotes"),
        },
        "config" => git_config::config(rest, scope),
        "init" => {
            let valued = [
                "--template",
                "--separate-git-dir",
                "-b",
                "--initial-branch",
                "--object-format",
                "--ref-format",
            ];
            let mut writes: Vec<&Word> = positionals(rest, &valued).into_iter().take(1).collect();
            writes.extend(option_value(rest, &[], &["--separate-git-dir"]));
            if rest
                .iter()
                .filter_map(Word::text)
                .any(|t| t.starts_with("--separate-git-dir="))
            {
                return verdict(Unknown, "--separate-git-dir= target not resolved");
            }
            Verdict::new(Benign, scope, "creates a repository").writing(writes)
        }
        "worktree" => match sub2 {
            Some("list") => verdict(ReadOnly, "lists worktrees"),
            Some("remove") if flag(&['f'], &["--force"]) => {
                verdict(Destructive, "force-removes a worktree")
            }
            Some("add") => {
                let path = subcommand(rest, &[]).and_then(|(i, _)| {
                    positionals(
                        rest.get(i + 1..).unwrap_or_default(),
                        &["-b", "-B", "--reason"],
                    )
                    .into_iter()
                    .next()
                });
                Verdict::new(Benign, scope, "adds a worktree").writing(path)
            }
            _ => verdict(Benign, "changes worktrees"),
        },
        "submodule" => match sub2 {
            None | Some("status" | "summary") => verdict(ReadOnly, "lists submodules"),
            Some("foreach") => verdict(Unknown, "runs a command in each submodule"),
            Some("deinit") => verdict(Destructive, "removes submodule checkouts"),
            Some(_) => verdict(Benign, "updates submodules"),
        },
        "reflog" => match sub2 {
            Some("expire" | "delete") => verdict(Destructive, "drops reflog entries"),
            Some("exists") => verdict(ReadOnly, "checks the reflog"),
            Some("show") => {
                let after = subcommand(rest, &[]).map_or(rest, |(i, _)| &rest[i + 1..]);
                read_only_options("reflog", after, scope)
                    .unwrap_or_else(|| verdict(Unknown, "reflog"))
            }
            _ => read_only_options("reflog", rest, scope)
                .unwrap_or_else(|| verdict(Unknown, "reflog")),
        },
        "notes" => match sub2 {
            None | Some("list" | "show") => verdict(ReadOnly, "lists notes"),
            Some(_) => verdict(Benign, "edits notes"),
        },
        "clone" => {
            let valued = [
                "-b",
                "--branch",
                "-o",
                "--origin",
                "--depth",
                "-c",
                "--config",
                "--reference",
                "--template",
                "-u",
                "--upload-pack",
                "--separate-git-dir",
                "--filter",
                "-j",
                "--jobs",
            ];
            let dest = positionals(rest, &valued).get(1).copied();
            Verdict::new(Benign, scope, "clones a repository").writing(dest)
        }
        s if git_options::read_only(s).is_some() => read_only_options(s, rest, scope)
            .unwrap_or_else(|| verdict(Unknown, "subcommand not known")),
        s if READ_ONLY.contains(&s) || BENIGN.contains(&s) => {
            let out = option_value(rest, &["-o"], &["--output", "--output-directory"]);
            let inline = rest
                .iter()
                .filter_map(Word::text)
                .any(|t| t.starts_with("--output="));
            if inline {
                return verdict(Unknown, "--output= target not resolved");
            }
            let (class, why) = if BENIGN.contains(&s) {
                (Benign, "changes the local repository")
            } else if out.is_some() {
                (Benign, "writes its --output file")
            } else {
                (ReadOnly, "read-only")
            };
            Verdict::new(class, scope, why).writing(out)
        }
        _ => verdict(Unknown, "subcommand not known"),
    }
}

fn checkout<'a>(rest: &'a [Word], scope: &str) -> Verdict<'a> {
    let verdict = |class, why: &str| Verdict::new(class, scope, why.to_owned());
    if has_flag(
        rest,
        &['f', 'p'],
        &["--force", "--ours", "--theirs", "--patch"],
    ) {
        return verdict(ShellClass::Destructive, "discards working-tree changes");
    }
    if has_flag(rest, &['b', 'B'], &["--orphan"]) {
        return verdict(ShellClass::Benign, "creates a branch");
    }
    if rest.iter().any(|w| w.text() == Some("--")) {
        return verdict(
            ShellClass::Destructive,
            "restores paths, discarding their changes",
        );
    }
    let names = positionals(rest, &["--conflict"]);
    match names.as_slice() {
        [] => verdict(ShellClass::Benign, "switches branch"),
        [one] => match one.text() {
            Some("-") => verdict(ShellClass::Benign, "switches to the previous branch"),
            Some(".") => verdict(
                ShellClass::Destructive,
                "restores every path, discarding changes",
            ),
            _ => verdict(
                ShellClass::Unknown,
                "branch or path? (a path loses its changes; use git switch)",
            ),
        },
        _ => verdict(ShellClass::Destructive, "restores paths from a commit"),
    }
}

fn branch<'a>(rest: &'a [Word], scope: &str) -> Verdict<'a> {
    let verdict = |class, why: &str| Verdict::new(class, scope, why.to_owned());
    let flag = |short: &[char], long: &[&str]| has_flag(rest, short, long);
    let delete = flag(&['d'], &["--delete"]);
    if flag(&['D'], &[]) || (delete && flag(&['f'], &["--force"])) {
        return verdict(ShellClass::Destructive, "force-deletes a branch");
    }
    if delete {
        return verdict(ShellClass::Benign, "deletes a merged branch");
    }
    let changes = [
        "--move",
        "--copy",
        "--set-upstream-to",
        "--unset-upstream",
        "--edit-description",
        "--force",
        "--track",
        "--no-track",
    ];
    if flag(&['m', 'M', 'c', 'C', 'u', 'f'], &changes) {
        return verdict(ShellClass::Benign, "changes branches");
    }
    let listing = [
        "--list",
        "--all",
        "--remotes",
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
        "--show-current",
    ];
    let valued = [
        "--sort",
        "--format",
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
        "--column",
    ];
    if flag(&['l', 'a', 'r'], &listing) || positionals(rest, &valued).is_empty() {
        verdict(ShellClass::ReadOnly, "lists branches")
    } else {
        verdict(ShellClass::Benign, "creates a branch")
    }
}
