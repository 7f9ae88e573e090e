//! Programs that run another program: unwrapped so the inner command is what gets judged.
//!
//! - `sudo`/`doas` → always destructive, scope `sudo`/`doas`, inner command judged too.
//!   More launchers (`flock`, `ionice`, `chroot`, `setpriv`, `env -S` …) in [`super::launchers`].
//! - transparent (no scope of their own): `env` (assignments checked, `-C` followed),
//!   `timeout DUR`, `nice [-n N]`, `nohup`, `setsid`, `stdbuf`, `command`, `builtin`, `exec`,
//!   `time` (`-o FILE` is a write), `xargs` (the inner command gets paths from stdin),
//!   `uv run`/`poetry run`/`pipenv run`/`pdm run`.
//! - `bash|sh|zsh|dash|ksh -c SCRIPT` (any flag cluster with `c`, e.g. `-lc`, `-ec`) and
//!   `eval WORDS`: the script is parsed and classified recursively (depth-limited).
//! - shells and interpreters reading a script from stdin are destructive when stdin is a
//!   download (`curl … | sh`), as are `bash <(curl …)` and `sh -c "$(curl …)"`; otherwise a
//!   script file, inline code or stdin is unknown. A shell or interpreter reading stdin
//!   (`… | bash`, `bash <<< …`, `sh -s`) is opaque: bash deny and ask rules apply to it. `python -m pytest` (and other test/lint
//!   modules) is benign, `python -m pip` follows the pip rules, `--version` is read-only.

use super::ShellClass;
use super::rules::{CdTo, Dispatch, RuleCtx, Verdict, Wrap, WriteTo, dangerous_env};
use super::words::Word;
use super::{launchers, tools};

pub(super) fn dispatch<'a>(name: &str, args: &'a [Word], ctx: &RuleCtx) -> Option<Dispatch<'a>> {
    let wrap = |skip: usize| {
        Dispatch::Wrapper(Wrap {
            inner: args.get(skip..).unwrap_or_default(),
            ..Wrap::default()
        })
    };
    let alone = |class: ShellClass, why: &str| Dispatch::Leaf(Verdict::new(class, name, why));
    let inner_or = |skip: usize, class: ShellClass, why: &str| {
        if skip >= args.len() {
            alone(class, why)
        } else {
            wrap(skip)
        }
    };
    if let Some(dispatch) = launchers::dispatch(name, args) {
        return Some(dispatch);
    }
    Some(match name {
        "sudo" | "doas" => {
            let valued: &[&str] = &[
                "-u",
                "-g",
                "-p",
                "-C",
                "-D",
                "-r",
                "-t",
                "-U",
                "-T",
                "-h",
                "--user",
                "--group",
                "--prompt",
                "--close-from",
                "--chdir",
                "--role",
                "--type",
                "--other-user",
                "--host",
                "--command-timeout",
            ];
            let skip = skip_options(args, valued);
            Dispatch::Wrapper(Wrap {
                inner: args.get(skip..).unwrap_or_default(),
                class: ShellClass::Destructive,
                reason: Some(format!("{name}: runs as root")),
                scope: Some(name.to_owned()),
                ..Wrap::default()
            })
        }
        "su" => alone(ShellClass::Destructive, "switches user"),
        "env" => env(args),
        "timeout" => {
            let valued = ["-s", "-k", "--signal", "--kill-after"];
            let skip = skip_options(args, &valued) + 1; // the duration
            inner_or(skip, ShellClass::Unknown, "no command")
        }
        "nice" => {
            let skip = skip_options(args, &["-n", "--adjustment"]);
            inner_or(skip, ShellClass::ReadOnly, "prints the niceness")
        }
        "nohup" | "setsid" | "builtin" => {
            inner_or(skip_options(args, &[]), ShellClass::Unknown, "no command")
        }
        "stdbuf" => {
            let skip = skip_options(args, &["-i", "-o", "-e", "--input", "--output", "--error"]);
            inner_or(skip, ShellClass::Unknown, "no command")
        }
        "command" => {
            let lits = args.iter().filter_map(Word::text);
            if lits
                .take_while(|t| t.starts_with('-'))
                .any(|t| t.contains(['v', 'V']))
            {
                alone(ShellClass::ReadOnly, "looks up a command")
            } else {
                inner_or(skip_options(args, &[]), ShellClass::ReadOnly, "no command")
            }
        }
        "exec" => inner_or(
            skip_options(args, &["-a"]),
            ShellClass::ReadOnly,
            "redirections only",
        ),
        "time" => {
            let skip = skip_options(args, &["-f", "--format", "-o", "--output"]);
            let out = super::rules::option_value(args, &["-o"], &["--output"]);
            if skip >= args.len() {
                return Some(alone(ShellClass::ReadOnly, "times nothing"));
            }
            Dispatch::Wrapper(Wrap {
                inner: args.get(skip..).unwrap_or_default(),
                writes: out.map(WriteTo::Word).into_iter().collect(),
                ..Wrap::default()
            })
        }
        "xargs" => {
            let valued = [
                "-a",
                "-E",
                "-I",
                "-L",
                "-n",
                "-P",
                "-s",
                "-d",
                "--arg-file",
                "--delimiter",
                "--eof",
                "--replace",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ];
            let skip = skip_options(args, &valued);
            if skip >= args.len() {
                return Some(alone(ShellClass::ReadOnly, "echoes its input"));
            }
            Dispatch::Wrapper(Wrap {
                inner: args.get(skip..).unwrap_or_default(),
                xargs: true,
                ..Wrap::default()
            })
        }
        "uv" | "poetry" | "pipenv" | "pdm" if args.first().and_then(Word::text) == Some("run") => {
            let rest = args.get(1..).unwrap_or_default();
            let valued = [
                "--with",
                "--with-editable",
                "--with-requirements",
                "--python",
                "-p",
                "--package",
                "--extra",
                "--group",
                "--env-file",
                "--directory",
                "--project",
                "--index",
                "--index-url",
                "--extra-index-url",
                "--find-links",
            ];
            let skip = 1 + skip_options(rest, &valued);
            inner_or(skip, ShellClass::Unknown, "no command")
        }
        "bash" | "sh" | "zsh" | "dash" | "ksh" | "mksh" | "fish" => shell(name, args, ctx),
        "eval" => match super::rules::literals(args) {
            Some(words) => Dispatch::Script {
                program: name.to_owned(),
                source: words.join(" "),
            },
            None => opaque(downloaded(
                name,
                ctx,
                "evaluates text that expands at run time",
            )),
        },
        "source" | "." => downloaded(name, ctx, "runs a script in this shell"),
        n if is_interpreter(n) => interpreter(n, args, ctx),
        _ => return None,
    })
}

/// Index of the first word after the options (`--` ends them; `valued` take a value).
pub(super) fn skip_options(args: &[Word], valued: &[&str]) -> usize {
    let mut i = 0;
    while let Some(text) = args.get(i).and_then(Word::text) {
        if text == "--" {
            return i + 1;
        }
        if !text.starts_with('-') || text.len() < 2 {
            break;
        }
        i += if valued.contains(&text) { 2 } else { 1 };
    }
    i
}

/// Unknown, or destructive when an argument's substitution downloads.
fn downloaded<'a>(name: &str, ctx: &RuleCtx, why: &str) -> Dispatch<'a> {
    if ctx.args_download {
        Dispatch::Leaf(Verdict::new(
            ShellClass::Destructive,
            name,
            "runs a downloaded script",
        ))
    } else {
        Dispatch::Leaf(Verdict::new(ShellClass::Unknown, name, why))
    }
}

/// Marks a leaf as running commands nobody can see.
fn opaque(dispatch: Dispatch<'_>) -> Dispatch<'_> {
    match dispatch {
        Dispatch::Leaf(verdict) => Dispatch::Leaf(verdict.opaque()),
        other => other,
    }
}

fn from_stdin<'a>(name: &str, ctx: &RuleCtx) -> Dispatch<'a> {
    if ctx.stdin_download {
        Dispatch::Leaf(
            Verdict::new(
                ShellClass::Destructive,
                name,
                "runs a download piped into it",
            )
            .opaque(),
        )
    } else {
        Dispatch::Leaf(
            Verdict::new(ShellClass::Unknown, name, "reads commands from stdin").opaque(),
        )
    }
}

fn env(args: &[Word]) -> Dispatch<'_> {
    let mut i = 0;
    let mut cd = None;
    let mut class = ShellClass::ReadOnly;
    let mut reason = None;
    while let Some(arg) = args.get(i) {
        let raw = arg.text().unwrap_or(&arg.raw);
        match raw {
            "--" => {
                i += 1;
                break;
            }
            "-u" | "--unset" => i += 2,
            "-C" | "--chdir" => {
                cd = Some(args.get(i + 1).map_or(CdTo::Unknown, CdTo::Word));
                i += 2;
            }
            t if t.starts_with("--chdir=") || (t.starts_with("-C") && t.len() > 2) => {
                cd = Some(CdTo::Unknown);
                i += 1;
            }
            t if t.starts_with("-S") || t.starts_with("--split-string") => {
                return launchers::split_string(args, i, cd.is_some());
            }
            t if t.starts_with('-') && t.len() > 1 => i += 1,
            t if t.contains('=') && !t.starts_with('=') => {
                let name = t.split('=').next().unwrap_or_default();
                if dangerous_env(name) {
                    class = ShellClass::Unknown;
                    reason = Some(format!("env: sets {name} (changes what runs)"));
                }
                i += 1;
            }
            _ => break,
        }
    }
    if i >= args.len() {
        return Dispatch::Leaf(Verdict::new(class, "env", "prints the environment"));
    }
    Dispatch::Wrapper(Wrap {
        inner: args.get(i..).unwrap_or_default(),
        class,
        reason,
        cd,
        ..Wrap::default()
    })
}

fn shell<'a>(name: &str, args: &'a [Word], ctx: &RuleCtx) -> Dispatch<'a> {
    let mut i = 0;
    let (mut command, mut stdin) = (false, false);
    while let Some(text) = args.get(i).and_then(Word::text) {
        if text == "--" || text == "-" {
            i += 1;
            stdin |= text == "-";
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            i += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
            continue;
        }
        let Some(cluster) = text.strip_prefix(['-', '+']).filter(|c| !c.is_empty()) else {
            break;
        };
        command |= cluster.contains('c');
        stdin |= cluster.contains('s');
        i += if cluster.contains(['o', 'O']) { 2 } else { 1 };
    }
    let rest = args.get(i..).unwrap_or_default();
    if command {
        return match rest.first() {
            Some(script) => match script.text() {
                Some(source) => Dispatch::Script {
                    program: name.to_owned(),
                    source: source.to_owned(),
                },
                None => opaque(downloaded(name, ctx, "script expands at run time")),
            },
            None => Dispatch::Leaf(Verdict::new(
                ShellClass::Unknown,
                name,
                "-c without a script",
            )),
        };
    }
    match rest.first() {
        Some(_) if !stdin => downloaded(name, ctx, "runs a script file"),
        _ => from_stdin(name, ctx),
    }
}

fn is_interpreter(name: &str) -> bool {
    let python = name
        .strip_prefix("python")
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    python
        || matches!(
            name,
            "node" | "nodejs" | "ruby" | "perl" | "php" | "lua" | "Rscript" | "pypy" | "pypy3"
        )
}

#[rustfmt::skip]
const PYTHON_TOOLS: &[&str] = &[
    "pytest", "unittest", "mypy", "black", "ruff", "isort", "flake8", "pylint", "tox", "nox",
    "compileall", "py_compile", "doctest", "coverage",
];

fn interpreter<'a>(name: &str, args: &'a [Word], ctx: &RuleCtx) -> Dispatch<'a> {
    let leaf = |class, scope: &str, why: &str| Dispatch::Leaf(Verdict::new(class, scope, why));
    let python = name.starts_with("python") || name.starts_with("pypy");
    let mut i = 0;
    while let Some(text) = args.get(i).and_then(Word::text) {
        match text {
            "--version" | "-V" | "--help" | "-h" => {
                return leaf(ShellClass::ReadOnly, name, "prints its version");
            }
            "-v" if !python => return leaf(ShellClass::ReadOnly, name, "prints its version"),
            "-" => return from_stdin(name, ctx),
            "-c" | "-e" | "--eval" | "-p" | "--print" | "-r" => {
                return downloaded(name, ctx, "runs inline code");
            }
            "--test" if !python => return leaf(ShellClass::Benign, name, "runs tests"),
            "-m" if python => {
                let module = args.get(i + 1).and_then(Word::text).unwrap_or_default();
                let scope = format!("{name} -m {module}");
                let rest = args.get(i + 2..).unwrap_or_default();
                return match module {
                    m if PYTHON_TOOLS.contains(&m) => {
                        leaf(ShellClass::Benign, &scope, "test/lint tool")
                    }
                    "pip" => Dispatch::Leaf(tools::pip("pip", rest)),
                    "json.tool" | "site" | "sysconfig" | "platform" => {
                        leaf(ShellClass::ReadOnly, &scope, "read-only")
                    }
                    "venv" | "virtualenv" => Dispatch::Leaf(
                        Verdict::new(ShellClass::Benign, &scope, "creates a virtualenv")
                            .writing(super::rules::positionals(rest, &["--prompt"])),
                    ),
                    _ => leaf(ShellClass::Unknown, &scope, "runs a module"),
                };
            }
            "-W" | "-X" if python => i += 2,
            t if t.starts_with('-') && t.len() > 1 => i += 1,
            _ => break,
        }
    }
    match args.get(i) {
        None => from_stdin(name, ctx),
        Some(_) => downloaded(name, ctx, "runs a script"),
    }
}
