//! git's options as data: the global options before the subcommand, and the options of
//! the read-only subcommands (anything a table does not know is unknown and asks). Options
//! that run programs are listed as dangerous: `-p`/`--paginate`, `--exec-path`,
//! `--config-env` (global); `grep -O`/`--open-files-in-pager`; `--ext-diff` and
//! `--textconv` (diff, log, show, blame, cat-file); `cat-file --filters`; `ls-remote
//! --upload-pack`; `help --web`. The benign subcommands (fetch, clone, rebase …) keep
//! their own classification but are checked for the options that run programs
//! ([`benign_danger`]), abbreviations included (git accepts unique prefixes).

use super::argspec::Spec;

#[rustfmt::skip]
pub(super) const GLOBAL: Spec = Spec {
    options: &[
        "-C=", "-c=", "--git-dir=", "--work-tree=", "--namespace=", "--bare", "--no-pager", "-P",
        "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs",
        "--icase-pathspecs", "--no-optional-locks", "--no-advice", "-v", "-h", "--html-path",
        "--man-path", "--info-path", "--no-lazy-fetch", "--list-cmds=", "--attr-source=",
    ],
    reads: &[],
    writes: &[],
    danger: &[
        ("-p", "runs the pager"), ("--paginate", "runs the pager"),
        ("--exec-path?", "runs git programs from another directory"),
        ("--config-env=", "takes configuration from the environment"),
        ("--super-prefix=", "is internal"),
    ],
    numbers: false,
};

const EXT_DIFF: (&str, &str) = ("--ext-diff", "runs the external diff program");
const TEXTCONV: (&str, &str) = ("--textconv", "runs textconv filters");

#[rustfmt::skip]
const DIFF: Spec = Spec {
    options: &[
        "-p", "-u", "--patch", "-s", "--no-patch", "-U=", "--unified=", "--output-indicator-new=",
        "--output-indicator-old=", "--output-indicator-context=", "--raw", "--patch-with-raw",
        "-t", "--indent-heuristic", "--no-indent-heuristic", "--minimal", "--patience",
        "--histogram", "--anchored=", "--diff-algorithm=", "--stat?", "--compact-summary",
        "--numstat", "--shortstat", "-X?", "--dirstat?", "--cumulative", "--dirstat-by-file?",
        "--summary", "--patch-with-stat", "-z", "--name-only", "--name-status", "--submodule?",
        "--color?", "--no-color", "--color-moved?", "--no-color-moved", "--color-moved-ws=",
        "--no-color-moved-ws", "--word-diff?", "--word-diff-regex=", "--color-words?",
        "--no-renames", "--rename-empty", "--no-rename-empty", "--check", "--ws-error-highlight=",
        "--full-index", "--binary", "--abbrev?", "-B?", "--break-rewrites?", "-M?",
        "--find-renames?", "-C?", "--find-copies?", "--find-copies-harder", "-D",
        "--irreversible-delete", "-l=", "--diff-filter=", "-S=", "-G=", "--find-object=",
        "--pickaxe-all", "--pickaxe-regex", "--skip-to=", "--rotate-to=", "-R", "--relative?",
        "--no-relative", "-a", "--text", "--ignore-cr-at-eol", "--ignore-space-at-eol", "-b",
        "--ignore-space-change", "-w", "--ignore-all-space", "--ignore-blank-lines", "-I=",
        "--ignore-matching-lines=", "--inter-hunk-context=", "-W", "--function-context",
        "--exit-code", "--quiet", "--no-ext-diff", "--no-textconv", "--ignore-submodules?",
        "--src-prefix=", "--dst-prefix=", "--no-prefix", "--default-prefix", "--line-prefix=",
        "--ita-invisible-in-index", "--ita-visible-in-index", "--cached", "--staged",
        "--merge-base", "--no-index", "-1", "-2", "-3", "--base", "--ours", "--theirs", "-0",
        "--stat-width=", "--stat-name-width=", "--stat-graph-width=", "--stat-count=", "-r",
        "--root", "--stdin", "-m", "-v", "--no-commit-id", "-c", "--cc", "--combined-all-paths",
        "--always", "--diff-merges=", "--no-diff-merges", "--remerge-diff", "--dd",
    ],
    reads: &["-O="],
    writes: &["--output="],
    danger: &[EXT_DIFF, TEXTCONV],
    numbers: false,
};

#[rustfmt::skip]
const LOG: Spec = Spec {
    options: &[
        "-n=", "--max-count=", "--skip=", "--since=", "--after=", "--until=", "--before=",
        "--since-as-filter=", "--author=", "--committer=", "--grep=", "--grep-reflog=",
        "--all-match", "--invert-grep", "-i", "--regexp-ignore-case", "--basic-regexp", "-E",
        "--extended-regexp", "-F", "--fixed-strings", "-P", "--perl-regexp", "--remove-empty",
        "--merges", "--no-merges", "--min-parents=", "--max-parents=", "--no-min-parents",
        "--no-max-parents", "--first-parent", "--exclude-first-parent-only", "--not", "--all",
        "--branches?", "--tags?", "--remotes?", "--glob=", "--exclude=", "--reflog",
        "--alternate-refs", "--single-worktree", "--ignore-missing", "--bisect", "--stdin",
        "--cherry-mark", "--cherry-pick", "--left-only", "--right-only", "--cherry", "-g",
        "--walk-reflogs", "--merge", "--boundary", "--simplify-by-decoration", "--show-pulls",
        "--full-history", "--dense", "--sparse", "--simplify-merges", "--ancestry-path?",
        "--date-order", "--author-date-order", "--topo-order", "--reverse", "--no-walk?",
        "--do-walk", "--pretty?", "--format=", "--abbrev-commit", "--no-abbrev-commit",
        "--oneline", "--encoding=", "--expand-tabs?", "--no-expand-tabs", "--notes?",
        "--no-notes", "--show-notes?", "--standard-notes", "--no-standard-notes",
        "--show-signature", "--relative-date", "--date=", "--parents", "--children",
        "--left-right", "--graph", "--show-linear-break?", "--follow", "--no-decorate",
        "--decorate?", "--decorate-refs=", "--decorate-refs-exclude=", "--clear-decorations",
        "--source", "--mailmap", "--no-mailmap", "--use-mailmap", "--no-use-mailmap",
        "--full-diff", "--log-size", "-L=", "--no-abbrev", "--count", "--objects",
        "--objects-edge", "--no-object-names", "--unpacked", "--timestamp", "--header",
        "--max-age=", "--min-age=", "--in-commit-order", "--no-color", "--first-parent",
        "--show-origin", "--show-notes-by-default", "--no-graph",
    ],
    reads: &[],
    writes: &[],
    danger: &[EXT_DIFF, TEXTCONV],
    numbers: true,
};

/// shortlog's own flags, read before the log table (its `-n` is `--numbered`).
#[rustfmt::skip]
const SHORTLOG: Spec = Spec::harmless(&[
    "-n", "--numbered", "-s", "--summary", "-e", "--email", "-c", "--committer", "-w?",
    "--group=", "--format=",
]);

#[rustfmt::skip]
const STATUS: Spec = Spec::harmless(&[
    "-s", "--short", "-b", "--branch", "--show-stash", "--porcelain?", "--long", "-v",
    "--verbose", "-u?", "--untracked-files?", "--ignore-submodules?", "--ignored?", "-z",
    "--column?", "--no-column", "--ahead-behind", "--no-ahead-behind", "--renames",
    "--no-renames", "--find-renames?", "-M?",
]);

#[rustfmt::skip]
const GREP: Spec = Spec {
    options: &[
        "--cached", "--no-index", "--untracked", "--no-exclude-standard", "--exclude-standard",
        "--recurse-submodules", "-a", "--text", "--no-textconv", "-i", "--ignore-case", "-I",
        "--max-depth=", "-r", "--recursive", "--no-recursive", "-w", "--word-regexp", "-v",
        "--invert-match", "-h", "-H", "--full-name", "-E", "--extended-regexp", "-G",
        "--basic-regexp", "-P", "--perl-regexp", "-F", "--fixed-strings", "-n", "--line-number",
        "--column", "-l", "--files-with-matches", "--name-only", "-L", "--files-without-match",
        "-z", "--null", "-o", "--only-matching", "-c", "--count", "--color?", "--no-color",
        "--break", "--heading", "-p", "--show-function", "-C=", "--context=", "-A=",
        "--after-context=", "-B=", "--before-context=", "-W", "--function-context", "-m=",
        "--max-count=", "--threads=", "-e=", "--and", "--or", "--not", "--all-match", "-q",
        "--quiet",
    ],
    reads: &["-f="],
    writes: &[],
    danger: &[
        ("-O?", "runs a program (the pager) on the matching files"),
        ("--open-files-in-pager?", "runs a program (the pager) on the matching files"),
        TEXTCONV,
    ],
    numbers: true,
};

#[rustfmt::skip]
const BLAME: Spec = Spec {
    options: &[
        "-b", "--root", "--show-stats", "-f", "--show-name", "-n", "--show-number", "-s", "-e",
        "--show-email", "-w", "--incremental", "--porcelain", "--line-porcelain", "-p", "-t",
        "-l", "-c", "--score-debug", "-L=", "--reverse=", "--first-parent", "--date=",
        "--progress", "--no-progress", "-M?", "-C?", "--ignore-rev=", "--color-lines",
        "--color-by-age", "--minimal", "--abbrev?", "--encoding=", "--no-textconv",
    ],
    reads: &["-S=", "--contents=", "--ignore-revs-file="],
    writes: &[],
    danger: &[TEXTCONV],
    numbers: false,
};

#[rustfmt::skip]
const REV_PARSE: Spec = Spec::harmless(&[
    "--abbrev-ref?", "--short?", "--verify", "-q", "--quiet", "--git-dir", "--absolute-git-dir",
    "--git-common-dir", "--show-toplevel", "--show-prefix", "--show-cdup",
    "--show-superproject-working-tree", "--is-inside-work-tree", "--is-inside-git-dir",
    "--is-bare-repository", "--is-shallow-repository", "--symbolic", "--symbolic-full-name",
    "--all", "--branches?", "--tags?", "--remotes?", "--glob=", "--exclude=",
    "--local-env-vars", "--resolve-git-dir=", "--git-path=", "--shared-index-path",
    "--since=", "--after=", "--until=", "--before=", "--default=", "--prefix=", "--sq-quote",
    "--sq", "--keep-dashdash", "--stop-at-non-option", "--stuck-long", "--revs-only",
    "--no-revs", "--flags", "--no-flags", "--not", "--disambiguate=", "--path-format=",
    "--show-object-format?", "--show-ref-format", "--end-of-options",
]);

#[rustfmt::skip]
const LS_FILES: Spec = Spec {
    options: &[
        "-c", "--cached", "-d", "--deleted", "-m", "--modified", "-o", "--others", "-i",
        "--ignored", "-s", "--stage", "-u", "--unmerged", "-k", "--killed", "-z", "--directory",
        "--no-empty-directory", "--eol", "--deduplicate", "-x=", "--exclude=",
        "--exclude-per-directory=", "--exclude-standard", "--error-unmatch", "--with-tree=",
        "-t", "-v", "-f", "--full-name", "--recurse-submodules", "--abbrev?", "--debug",
        "--sparse", "--format=", "--resolve-undo",
        // ls-tree
        "-r", "-l", "--long", "--name-only", "--name-status", "--object-only", "--full-tree",
    ],
    reads: &["-X=", "--exclude-from="],
    writes: &[],
    danger: &[],
    numbers: false,
};

#[rustfmt::skip]
const REFS: Spec = Spec::harmless(&[
    // describe
    "--dirty?", "--broken?", "--all", "--tags", "--contains", "--abbrev=", "--candidates=",
    "--exact-match", "--debug", "--long", "--match=", "--exclude=", "--always",
    "--first-parent",
    // merge-base, show-ref, for-each-ref, name-rev, count-objects, cherry, var, version
    "-a", "--octopus", "--independent", "--is-ancestor", "--fork-point", "--head", "--heads",
    "--branches", "-d", "--dereference", "-s", "--hash?", "--verify", "-q", "--quiet",
    "--exclude-existing?", "--exists", "--count=", "--shell", "--perl", "--python", "--tcl",
    "--sort=", "--format=", "--color?", "--points-at=", "--merged?", "--no-merged?",
    "--contains?", "--no-contains?", "--ignore-case", "--omit-empty", "--include-root-refs",
    "--stdin", "--refs=", "--annotate-stdin", "--name-only", "--no-undefined", "-v",
    "--verbose", "-H", "--human-readable", "-l", "--build-options", "--raw",
    // check-ignore, check-attr, check-ref-format
    "-z", "-n", "--non-matching", "--no-index", "--cached", "--source=", "--normalize",
    "--allow-onelevel", "--no-allow-onelevel", "--refspec-pattern", "--branch",
    // show-branch
    "-r", "--remotes", "--current", "--topo-order", "--date-order", "--sparse", "--more=",
    "--list", "--merge-base", "--no-name", "--sha1-name", "--topics", "-g?", "--reflog?",
    "--no-color",
    // fsck
    "--unreachable", "--dangling", "--no-dangling", "--root", "--cache", "--no-reflogs",
    "--full", "--no-full", "--connectivity-only", "--strict", "--name-objects", "--progress",
    "--no-progress",
    // help
    "--all", "-g", "--guides", "-c", "--config", "-i", "--info", "-m", "--man",
]);

#[rustfmt::skip]
const CAT_FILE: Spec = Spec {
    options: &[
        "-t", "-s", "-e", "-p", "--path=", "--batch?", "--batch-check?", "--batch-command?",
        "--batch-all-objects", "--buffer", "--unordered", "--follow-symlinks",
        "--allow-unknown-type", "-Z", "--use-mailmap", "--no-use-mailmap", "--mailmap",
    ],
    reads: &[],
    writes: &[],
    danger: &[TEXTCONV, ("--filters", "runs the configured filters")],
    numbers: false,
};

#[rustfmt::skip]
const LS_REMOTE: Spec = Spec {
    options: &[
        "--heads", "--tags", "--branches", "--refs", "-q", "--quiet", "--exit-code",
        "--get-url", "--sort=", "-o=", "--server-option=", "--symref", "-h", "-t", "-b",
    ],
    reads: &[],
    writes: &[],
    danger: &[
        ("--upload-pack=", "runs a program in place of git-upload-pack"),
        ("-u=", "runs a program in place of git-upload-pack"),
    ],
    numbers: false,
};

const HELP_DANGER: Spec = Spec {
    options: &[],
    reads: &[],
    writes: &[],
    danger: &[
        ("-w", "runs a web browser"),
        ("--web", "runs a web browser"),
    ],
    numbers: false,
};

const FSCK_DANGER: Spec = Spec {
    options: &[],
    reads: &[],
    writes: &[],
    danger: &[("--lost-found", "writes .git/lost-found")],
    numbers: false,
};

/// The option tables of a read-only subcommand (`None`: not a read-only one).
pub(super) fn read_only(sub: &str) -> Option<&'static [&'static Spec]> {
    Some(match sub {
        "status" => &[&STATUS],
        "shortlog" => &[&SHORTLOG, &LOG, &DIFF],
        "log" | "show" | "whatchanged" | "rev-list" | "range-diff" | "reflog" => &[&LOG, &DIFF],
        "diff" | "diff-tree" | "diff-files" | "diff-index" | "stash show" => &[&DIFF],
        "grep" => &[&GREP],
        "blame" | "annotate" => &[&BLAME],
        "rev-parse" => &[&REV_PARSE],
        "ls-files" | "ls-tree" => &[&LS_FILES],
        "cat-file" => &[&CAT_FILE],
        "ls-remote" => &[&LS_REMOTE],
        "help" => &[&HELP_DANGER, &REFS],
        "fsck" => &[&FSCK_DANGER, &REFS],
        "describe" | "merge-base" | "show-ref" | "for-each-ref" | "count-objects" | "name-rev"
        | "check-ignore" | "check-attr" | "version" | "var" | "cherry" | "verify-commit"
        | "verify-tag" | "show-branch" | "check-ref-format" => &[&REFS],
        _ => return None,
    })
}

/// Options of the benign subcommands that run a program or plant one (hooks from a
/// template), long forms matched with git's abbreviations.
#[rustfmt::skip]
const BENIGN_DANGER: &[(&str, &[&str], &[char], &str)] = &[
    ("fetch", &["--upload-pack"], &[], "runs a program in place of git-upload-pack"),
    ("pull", &["--upload-pack"], &[], "runs a program in place of git-upload-pack"),
    ("clone", &["--upload-pack", "--template", "--config"], &['u', 'c'],
        "runs a program, or installs hooks or configuration"),
    ("init", &["--template"], &[], "installs hooks from a template"),
    ("archive", &["--remote", "--exec"], &[], "runs a program on a remote"),
    ("rebase", &["--exec", "--interactive"], &['x', 'i'], "runs commands or an editor"),
];

/// Why a benign subcommand's arguments run a program, if they do.
pub(super) fn benign_danger(sub: &str, args: &[&str], sub2: Option<&str>) -> Option<String> {
    match (sub, sub2) {
        ("bisect", Some("run")) => return Some("bisect run runs a command".to_owned()),
        ("maintenance", Some("start" | "register" | "unregister" | "stop" | "run")) => {
            return Some("maintenance schedules jobs outside the workspace".to_owned());
        }
        _ => {}
    }
    let (_, long, short, why) = BENIGN_DANGER.iter().find(|(s, ..)| *s == sub)?;
    for arg in args.iter().take_while(|a| **a != "--") {
        if let Some(name) = arg.strip_prefix("--") {
            let name = name.split('=').next().unwrap_or(name);
            // git takes any unique prefix of a long option.
            if name.len() >= 2 && long.iter().any(|l| l[2..].starts_with(name)) {
                return Some(format!("--{name} {why}"));
            }
        } else if let Some(cluster) = arg.strip_prefix('-')
            && let Some(c) = cluster.chars().find(|c| short.contains(c))
        {
            return Some(format!("-{c} {why}"));
        }
    }
    None
}
