//! The option grammar of one program, as data: which options it knows, which of them take
//! a value, which name a file it reads or writes, and which run a program, load code or
//! write elsewhere. [`parse`] reads an argument list against a [`Spec`] the way getopt and
//! its relatives do: bundled short flags (`-abc`), attached values (`-Ovalue`, `-n5`),
//! `--opt=value` and `--opt value`, optional values only attached (`--color`,
//! `--color=always`), `--` ending the options. Options anywhere before `--` count (GNU
//! permutes arguments).
//!
//! **An option the spec does not list is unknown, never harmless** (an abbreviation like
//! `--to-com` included): the caller classifies the command as unknown. A word that expands
//! at run time where an option may stand could be any option, so it is reported too.
//!
//! Spelling in the tables: `-x`/`--long` is a flag; a trailing `=` takes a value (`-e=`,
//! `--regexp=`); a trailing `?` takes an optional value that must be attached (`-O?`,
//! `--color?`); a trailing `==` takes two words (`--arg==`: `--arg NAME VALUE`).

use super::words::Word;

/// What a program's options mean.
#[derive(Debug, Default)]
pub(super) struct Spec {
    /// Options that only change what is printed or matched.
    pub options: &'static [&'static str],
    /// Options whose value is a file or directory the program reads.
    pub reads: &'static [&'static str],
    /// Options whose value is a file the program writes.
    pub writes: &'static [&'static str],
    /// Options that run a program, load code or write elsewhere, with why.
    pub danger: &'static [(&'static str, &'static str)],
    /// `-5` (a count, as in `head -5`, `grep -3`) is accepted.
    pub numbers: bool,
}

impl Spec {
    /// A program whose known options only change what is printed or matched.
    pub(super) const fn harmless(options: &'static [&'static str]) -> Spec {
        Spec {
            options,
            reads: &[],
            writes: &[],
            danger: &[],
            numbers: false,
        }
    }
}

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    Value,
    /// Only attached: `-Ovalue`, `--color=always`.
    Optional,
    /// Two following words.
    Two,
}

fn split(spelling: &'static str) -> (&'static str, Arity) {
    if let Some(name) = spelling.strip_suffix("==") {
        (name, Arity::Two)
    } else if let Some(name) = spelling.strip_suffix('=') {
        (name, Arity::Value)
    } else if let Some(name) = spelling.strip_suffix('?') {
        (name, Arity::Optional)
    } else {
        (spelling, Arity::Flag)
    }
}

/// What an option is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Harmless,
    Reads,
    Writes,
    Danger(&'static str),
}

/// How [`super::parse`] shows a process substitution word.
pub(super) const PROCESS_SUBSTITUTION: &str = "<(…)";

/// `--help` and `--version` every program knows.
const UNIVERSAL: &[&str] = &["--help", "--version"];

impl Spec {
    fn lookup(&self, name: &str) -> Option<(&'static str, Arity, Role)> {
        let find = |list: &[&'static str], role: Role| {
            list.iter().find_map(|s| {
                let (n, arity) = split(s);
                (n == name).then_some((n, arity, role))
            })
        };
        self.danger
            .iter()
            .find_map(|(s, why)| {
                let (n, arity) = split(s);
                (n == name).then_some((n, arity, Role::Danger(why)))
            })
            .or_else(|| find(self.options, Role::Harmless))
            .or_else(|| find(UNIVERSAL, Role::Harmless))
            .or_else(|| find(self.reads, Role::Reads))
            .or_else(|| find(self.writes, Role::Writes))
    }
}

/// An option value or operand: a word of the command, or text cut out of one.
#[derive(Debug, Clone)]
pub(super) enum Arg<'a> {
    Word(&'a Word),
    /// An attached value (`--file=x`, `-fx`).
    Inline(String),
}

impl Arg<'_> {
    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Arg::Word(w) => w.text(),
            Arg::Inline(t) => Some(t),
        }
    }

    /// As written, for reasons.
    pub(super) fn shown(&self) -> &str {
        match self {
            Arg::Word(w) => &w.raw,
            Arg::Inline(t) => t,
        }
    }
}

/// The options and operands of one argument list.
#[derive(Debug, Default)]
pub(super) struct Parsed<'a> {
    /// Non-option words, in order.
    pub operands: Vec<&'a Word>,
    /// Values of [`Spec::reads`] options.
    pub reads: Vec<Arg<'a>>,
    /// Values of [`Spec::writes`] options.
    pub writes: Vec<Arg<'a>>,
    /// Every option seen, as spelled in the spec (without `=`/`?`), with its value.
    pub seen: Vec<(&'static str, Option<Arg<'a>>)>,
    /// Index in the arguments of each operand (for programs whose operands are mixed
    /// with expression words, like `find`).
    pub first_operand: Option<usize>,
}

impl<'a> Parsed<'a> {
    /// Whether any of these options was given.
    pub(super) fn has(&self, names: &[&str]) -> bool {
        self.seen.iter().any(|(n, _)| names.contains(n))
    }

    /// The values of these options.
    pub(super) fn values(&self, names: &[&str]) -> Vec<&Arg<'a>> {
        self.seen
            .iter()
            .filter(|(n, _)| names.contains(n))
            .filter_map(|(_, v)| v.as_ref())
            .collect()
    }
}

/// Why the arguments are not harmless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Problem {
    /// A known option that runs a program, loads code or writes elsewhere.
    Danger(String),
    /// An option the spec does not know, a missing value, or a word that expands at run
    /// time where an option may stand.
    Unknown(String),
}

/// Reads `args` against `spec`.
pub(super) fn parse<'a>(spec: &Spec, args: &'a [Word]) -> Result<Parsed<'a>, Problem> {
    parse_in(&[spec], args, false)
}

/// Reads `args` against several tables (a subcommand sharing diff and log options).
pub(super) fn parse_all<'a>(specs: &[&Spec], args: &'a [Word]) -> Result<Parsed<'a>, Problem> {
    parse_in(specs, args, false)
}

/// Reads the options before the first operand (git's global options before the
/// subcommand); [`Parsed::first_operand`] is where they end.
pub(super) fn parse_head<'a>(spec: &Spec, args: &'a [Word]) -> Result<Parsed<'a>, Problem> {
    parse_in(&[spec], args, true)
}

fn lookup_in(specs: &[&Spec], name: &str) -> Option<(&'static str, Arity, Role)> {
    specs.iter().find_map(|spec| spec.lookup(name))
}

fn parse_in<'a>(specs: &[&Spec], args: &'a [Word], head: bool) -> Result<Parsed<'a>, Problem> {
    let numbers = specs.iter().any(|s| s.numbers);
    let mut out = Parsed::default();
    let mut i = 0;
    let mut options_done = false;
    while let Some(word) = args.get(i) {
        i += 1;
        let Some(text) = word.text() else {
            // A process substitution is a pipe's path (`/dev/fd/63`), `~/x` a path below
            // home: never an option.
            if options_done || word.raw == PROCESS_SUBSTITUTION || word.home {
                push_operand(&mut out, word, i - 1);
                continue;
            }
            return Err(Problem::Unknown(format!(
                "{} expands at run time (it could be any option)",
                word.raw
            )));
        };
        if options_done || text == "-" || !text.starts_with('-') {
            push_operand(&mut out, word, i - 1);
            if head {
                break;
            }
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        if text.starts_with("--") {
            let (name, inline) = match text.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (text, None),
            };
            let Some((spelled, arity, role)) = lookup_in(specs, name) else {
                return Err(Problem::Unknown(format!("unknown option {name}")));
            };
            let value = match (arity, inline) {
                (Arity::Flag, Some(_)) => {
                    return Err(Problem::Unknown(format!("{name} takes no value")));
                }
                (Arity::Flag | Arity::Optional, None) => None,
                (_, Some(v)) => Some(Arg::Inline(v.to_owned())),
                (Arity::Value, None) => Some(Arg::Word(next_value(args, &mut i, name)?)),
                (Arity::Two, None) => {
                    next_value(args, &mut i, name)?;
                    Some(Arg::Word(next_value(args, &mut i, name)?))
                }
            };
            record(&mut out, spelled, role, value)?;
            continue;
        }
        let cluster = &text[1..];
        if numbers && cluster.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        for (at, c) in cluster.char_indices() {
            let name = format!("-{c}");
            let Some((spelled, arity, role)) = lookup_in(specs, &name) else {
                return Err(Problem::Unknown(format!("unknown option {name}")));
            };
            let tail = &cluster[at + c.len_utf8()..];
            let value = match arity {
                Arity::Flag => None,
                Arity::Optional if tail.is_empty() => None,
                Arity::Value | Arity::Optional | Arity::Two if !tail.is_empty() => {
                    Some(Arg::Inline(tail.to_owned()))
                }
                Arity::Value | Arity::Optional => Some(Arg::Word(next_value(args, &mut i, &name)?)),
                Arity::Two => {
                    next_value(args, &mut i, &name)?;
                    Some(Arg::Word(next_value(args, &mut i, &name)?))
                }
            };
            let takes_rest = value.is_some();
            record(&mut out, spelled, role, value)?;
            if takes_rest {
                break;
            }
        }
    }
    Ok(out)
}

fn push_operand<'a>(out: &mut Parsed<'a>, word: &'a Word, index: usize) {
    out.first_operand.get_or_insert(index);
    out.operands.push(word);
}

fn next_value<'a>(args: &'a [Word], i: &mut usize, name: &str) -> Result<&'a Word, Problem> {
    let value = args
        .get(*i)
        .ok_or_else(|| Problem::Unknown(format!("{name} without its value")))?;
    *i += 1;
    Ok(value)
}

fn record<'a>(
    out: &mut Parsed<'a>,
    spelled: &'static str,
    role: Role,
    value: Option<Arg<'a>>,
) -> Result<(), Problem> {
    match role {
        Role::Danger(why) => return Err(Problem::Danger(format!("{spelled} {why}"))),
        Role::Reads => out.reads.extend(value.clone()),
        Role::Writes => out.writes.extend(value.clone()),
        Role::Harmless => {}
    }
    out.seen.push((spelled, value));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec {
        options: &["-n", "-i", "-e=", "--regexp=", "--color?", "-O?", "--arg=="],
        reads: &["-f=", "--file="],
        writes: &["-o=", "--output="],
        danger: &[("--pre=", "runs a program"), ("-X", "runs a program")],
        numbers: true,
    };

    fn words(line: &str) -> Vec<Word> {
        line.split(' ')
            .map(|w| super::super::words::word(w, 0).unwrap())
            .collect()
    }

    fn texts(args: &[Arg<'_>]) -> Vec<String> {
        args.iter()
            .map(|a| a.text().unwrap_or("?").to_owned())
            .collect()
    }

    #[test]
    fn bundles_attached_values_and_double_dash() {
        let args = words("-ni -epat -f list -5 --color --arg a b -- --pre=x file");
        let p = parse(&SPEC, &args).unwrap();
        let ops: Vec<_> = p.operands.iter().map(|w| w.raw.as_str()).collect();
        assert_eq!(ops, ["--pre=x", "file"]);
        assert_eq!(texts(&p.reads), ["list"]);
        assert!(p.has(&["-e"]) && p.has(&["--color"]) && p.has(&["--arg"]));
        let args = words("-nf/etc/x --output=o -o p");
        let p = parse(&SPEC, &args).unwrap();
        assert_eq!(texts(&p.reads), ["/etc/x"]);
        assert_eq!(texts(&p.writes), ["o", "p"]);
    }

    #[test]
    fn danger_in_every_spelling() {
        for line in ["--pre=x", "--pre x", "-nX", "a --pre x"] {
            assert!(
                matches!(parse(&SPEC, &words(line)), Err(Problem::Danger(_))),
                "{line}"
            );
        }
    }

    #[test]
    fn unknown_options_abbreviations_and_missing_values() {
        for line in [
            "-q",
            "--pr=x",
            "--regex=x",
            "-e",
            "--color=x -z",
            "--colo",
            "-n=3",
        ] {
            assert!(
                matches!(parse(&SPEC, &words(line)), Err(Problem::Unknown(_))),
                "{line}"
            );
        }
        // An optional value is only attached: the next word is an operand.
        let args = words("-O file");
        let p = parse(&SPEC, &args).unwrap();
        assert_eq!(p.operands.len(), 1);
        assert!(parse(&SPEC, &words("$X")).is_err());
        assert!(parse(&SPEC, &words("-- $X")).is_ok());
    }
}
