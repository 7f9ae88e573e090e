//! Per-program verdicts: the shared types ([`Dispatch`], [`Verdict`], [`WriteTo`],
//! [`ReadFrom`]), argument helpers, and the dispatch to the per-program modules: git
//! ([`super::git`]), multi-command tools ([`super::tools`]), read-only programs
//! ([`super::readers`], with their option tables), writers, system-level destroyers and
//! build runners ([`super::writers`]); wrappers and shells in [`super::wrappers`].
//!
//! Decisions (see also the module headers of `readers`, `tools`, `git`, `tar`, `find`):
//! - read-only: coreutils-style readers, `grep`/`rg`, `find` without `-exec`/`-delete`/
//!   `-fprint*`, `sed` without `-i` and without `w`/`e`, `sort`/`tree` without `-o`, shell
//!   builtins that only touch shell state (`cd`, `export`, `set` …) — each only with the
//!   options its table knows;
//! - benign: `touch`, `mkdir`, `cp`, `mv`, `ln`, `tee`, `rm FILE` (non-recursive) and other
//!   writers whose targets resolve inside the workspace; build/test/lint runners (`make`,
//!   `pytest`, `tsc`, `eslint` …) — they run in, and write to, their working directory.
//! - destructive: `rm -r`, `chmod -R`/`chown -R`, `dd`, `shred`, `truncate`, `mkfs*`,
//!   disk tools, `shutdown`/`reboot`, `kill -1`, deleting through `xargs`/`find -exec`.
//! - unknown: everything else, including interpreters running scripts (`python x.py`),
//!   network tools (`curl`, `ssh`), `awk` (can run `system()`), pagers, unknown options.

use super::ShellClass;
use super::argspec::Arg;
use super::words::Word;
use super::{dirs, git, readers, scope, tools, wrappers, writers};

/// What the surroundings tell a rule.
#[derive(Debug, Clone, Default)]
pub(super) struct RuleCtx {
    /// stdin comes from a download (`curl … |`).
    pub stdin_download: bool,
    /// An argument's substitution downloads (`bash <(curl …)`, `sh -c "$(curl …)"`).
    pub args_download: bool,
    /// Run by `xargs`: more arguments come from stdin.
    pub xargs: bool,
    /// Run by `find -exec`/`fd -x`: `{}` stands for found paths.
    pub find_exec: bool,
    /// How many wrappers (`env`, `nice`, `find -exec` …) this command is nested in.
    pub wrapped: usize,
}

/// A path a command writes.
#[derive(Debug, Clone)]
pub(super) enum WriteTo<'a> {
    /// The working directory (build tools, `git commit`).
    Cwd,
    Word(&'a Word),
    /// An inline option value (`--target-dir=/x`).
    Literal(String),
}

/// A path a command reads (its operands and file options), judged by the engine like the
/// paths of the file tools: outside the workspace, or a secret location.
#[derive(Debug, Clone)]
pub(super) enum ReadFrom<'a> {
    /// The working directory (`ls`, `rg PATTERN`, `find` without a path).
    Cwd,
    Arg(Arg<'a>),
    /// Paths nobody can name before it runs (they come from stdin through `xargs`).
    Unknown(&'static str),
}

/// Where `cd` goes.
#[derive(Debug, Clone)]
pub(super) enum CdTo<'a> {
    Word(&'a Word),
    Home,
    Unknown,
}

/// A transparent wrapper: judge `inner` as the real command.
#[derive(Debug, Default)]
pub(super) struct Wrap<'a> {
    pub inner: &'a [Word],
    /// The wrapper's own contribution (`sudo` → destructive).
    pub class: ShellClass,
    pub reason: Option<String>,
    pub scope: Option<String>,
    pub writes: Vec<WriteTo<'a>>,
    pub xargs: bool,
    pub cd: Option<CdTo<'a>>,
}

/// The verdict on a program that runs no other program (except `execs`).
#[derive(Debug)]
pub(super) struct Verdict<'a> {
    pub class: ShellClass,
    pub reason: String,
    pub scope: String,
    pub writes: Vec<WriteTo<'a>>,
    /// Commands it runs (`find -exec CMD ;`).
    pub execs: Vec<&'a [Word]>,
    pub cd: Option<CdTo<'a>>,
    /// Known to write outside the workspace (`cargo install`, `git config --global`).
    pub outside: bool,
    /// What links it creates point to (`ln [-s] SOURCE… LINK`): outside → unknown.
    pub links: Vec<&'a Word>,
    /// It runs commands the classifier cannot see (a shell reading stdin): deny and ask
    /// rules then apply whatever their pattern.
    pub opaque: bool,
    /// What it reads (files and directories named by its arguments).
    pub reads: Vec<ReadFrom<'a>>,
    /// It reads directories recursively (`grep -r`, `rg`, `find`): a directory holding a
    /// secret location counts as reading it.
    pub recursive: bool,
}

impl<'a> Verdict<'a> {
    pub(super) fn new(class: ShellClass, scope: &str, reason: impl Into<String>) -> Self {
        Self {
            class,
            reason: format!("{scope}: {}", reason.into()),
            scope: scope.to_owned(),
            writes: Vec::new(),
            execs: Vec::new(),
            cd: None,
            outside: false,
            links: Vec::new(),
            opaque: false,
            reads: Vec::new(),
            recursive: false,
        }
    }

    pub(super) fn reading(mut self, args: impl IntoIterator<Item = ReadFrom<'a>>) -> Self {
        self.reads.extend(args);
        self
    }

    pub(super) fn opaque(mut self) -> Self {
        self.opaque = true;
        self
    }

    pub(super) fn writing(mut self, words: impl IntoIterator<Item = &'a Word>) -> Self {
        self.writes.extend(words.into_iter().map(WriteTo::Word));
        self
    }

    pub(super) fn outside(mut self) -> Self {
        self.outside = true;
        self
    }
}

pub(super) enum Dispatch<'a> {
    Wrapper(Wrap<'a>),
    /// `bash -c SCRIPT`, `eval …`: parse and classify `source`.
    Script {
        program: String,
        source: String,
    },
    Leaf(Verdict<'a>),
}

/// `/usr/bin/rm` is `rm`; `./rm` stays `./rm` (a local program, unknown).
pub(super) fn program_name(argv0: &str) -> &str {
    const SYSTEM_DIRS: &[&str] = &[
        "/bin/",
        "/usr/bin/",
        "/usr/local/bin/",
        "/sbin/",
        "/usr/sbin/",
        "/usr/local/sbin/",
    ];
    SYSTEM_DIRS
        .iter()
        .find_map(|dir| argv0.strip_prefix(dir).filter(|rest| !rest.contains('/')))
        .unwrap_or(argv0)
}

/// Variables that change which program later runs, or what it loads.
pub(super) fn dangerous_env(name: &str) -> bool {
    name.starts_with("LD_")
        || name.starts_with("DYLD_")
        // GIT_CONFIG_COUNT/KEY_n/VALUE_n, GIT_CONFIG_GLOBAL …: config that may run programs.
        || name.starts_with("GIT_CONFIG")
        || matches!(
            name,
            "PATH"
                | "BASH_ENV"
                | "ENV"
                | "IFS"
                | "PROMPT_COMMAND"
                | "SHELLOPTS"
                | "NODE_OPTIONS"
                | "PYTHONSTARTUP"
                | "PERL5OPT"
                | "RUBYOPT"
                | "PAGER"
                | "GIT_PAGER"
                | "EDITOR"
                | "VISUAL"
                | "GIT_EDITOR"
                | "GIT_SSH"
                | "GIT_SSH_COMMAND"
                | "GIT_EXTERNAL_DIFF"
                | "GIT_EXEC_PATH"
                | "GIT_CONFIG_PARAMETERS"
                | "GIT_DIR"
                | "GIT_WORK_TREE"
                | "RUSTC_WRAPPER"
                | "CARGO_BUILD_RUSTC_WRAPPER"
                // Programs and options read-only programs take from the environment.
                | "LESSOPEN"
                | "LESSCLOSE"
                | "MANPAGER"
                | "MANOPT"
                | "MANROFFOPT"
                | "RIPGREP_CONFIG_PATH"
                | "TAR_OPTIONS"
                | "GIT_ASKPASS"
                | "SSH_ASKPASS"
                | "GIT_PROXY_COMMAND"
                | "GIT_SEQUENCE_EDITOR"
                | "GIT_TEMPLATE_DIR"
                | "BROWSER"
        )
}

// ---------------------------------------------------------------- argument helpers

/// All literal values, or `None` if some argument expands at run time.
pub(super) fn literals(args: &[Word]) -> Option<Vec<&str>> {
    args.iter().map(Word::text).collect()
}

/// A short option letter (in any cluster like `-rf`) or a long option (`--recursive`,
/// `--output=x`) appears before `--`.
pub(super) fn has_flag(args: &[Word], short: &[char], long: &[&str]) -> bool {
    for arg in args.iter().filter_map(Word::text) {
        if arg == "--" {
            break;
        }
        if let Some(name) = arg.strip_prefix("--") {
            let name = name.split('=').next().unwrap_or(name);
            if long.iter().any(|l| l.trim_start_matches("--") == name) {
                return true;
            }
        } else if let Some(cluster) = arg.strip_prefix('-')
            && cluster.chars().any(|c| short.contains(&c))
        {
            return true;
        }
    }
    false
}

/// The value of an option: `-o FILE`, `-oFILE`, `--output FILE`, `--output=FILE`.
pub(super) fn option_value<'a>(
    args: &'a [Word],
    short: &[&str],
    long: &[&str],
) -> Option<&'a Word> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(text) = arg.text() else { continue };
        if text == "--" {
            break;
        }
        if short.contains(&text) || long.contains(&text) {
            return iter.next();
        }
    }
    None
}

/// Whether `--long=VALUE` or `-sVALUE` forms appear (their value is inline, not a word).
pub(super) fn has_inline_value(args: &[Word], short: &[&str], long: &[&str]) -> bool {
    args.iter().filter_map(Word::text).any(|t| {
        long.iter().any(|l| t.starts_with(&format!("{l}=")))
            || short.iter().any(|s| t.starts_with(s) && t.len() > s.len())
    })
}

/// Non-option arguments; options listed in `valued` consume the next word.
/// Words that expand at run time count as positional.
pub(super) fn positionals<'a>(args: &'a [Word], valued: &[&str]) -> Vec<&'a Word> {
    let mut out = Vec::new();
    let mut iter = args.iter();
    let mut options_done = false;
    while let Some(arg) = iter.next() {
        match arg.text() {
            Some("--") if !options_done => options_done = true,
            Some(t) if !options_done && t.starts_with('-') && t.len() > 1 => {
                if valued.contains(&t) {
                    iter.next();
                }
            }
            _ => out.push(arg),
        }
    }
    out
}

// ---------------------------------------------------------------- dispatch

pub(super) fn dispatch<'a>(argv0: &str, args: &'a [Word], ctx: &RuleCtx) -> Dispatch<'a> {
    let name = program_name(argv0);
    if let Some(dispatch) = wrappers::dispatch(name, args, ctx) {
        return dispatch;
    }
    Dispatch::Leaf(leaf(name, args, ctx))
}

fn leaf<'a>(name: &str, args: &'a [Word], ctx: &RuleCtx) -> Verdict<'a> {
    let scope = scope::scope(name, args);
    if name == "git" {
        return git::classify(args, &scope);
    }
    if let Some(v) = tools::classify(name, args, &scope) {
        return dirs::with_directories(v, name, args);
    }
    if let Some(v) = readers::reader(name, args, ctx, &scope) {
        return v;
    }
    if let Some(v) = writers::writer(name, args, ctx, &scope) {
        return v;
    }
    if let Some(v) = writers::system(name, args, &scope) {
        return v;
    }
    if let Some(v) = writers::runner(name, args, &scope) {
        return dirs::with_directories(v, name, args);
    }
    Verdict::new(ShellClass::Unknown, &scope, "not a known program")
}
