//! The simple commands of a script as command lines, for rule matching (`git push*`).
//!
//! Every program the walker invokes is rendered once per level: a wrapper with its inner
//! command (`timeout 5 touch t`), then the inner command alone (`touch t`). Two forms:
//! - `plain`: system directories stripped from argv0 (`/usr/bin/rm` → `rm`, `./rm` stays),
//!   arguments as written (quotes removed). Allow rules match this form only, so an allow
//!   rule never covers a local `./rm` or a `git -c core.pager=…` it did not name.
//! - `normalized`: argv0's basename (`./touch` → `touch`), and for git the global options
//!   dropped (`git -C . push` → `git push`). Deny and ask rules match both forms.

use std::path::Path;

use super::rules::program_name;
use super::words::Word;

/// One invoked program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandLine {
    pub(crate) plain: String,
    pub(crate) normalized: String,
    /// This level only reads (its own verdict; wrappers like `env`, `timeout` are
    /// read-only themselves). Allow rules need not cover read-only levels.
    pub(crate) read_only: bool,
}

/// git's global options that take a value as the next word.
const GIT_VALUED: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--exec-path",
    "--config-env",
    "--super-prefix",
];

fn shown(word: &Word) -> &str {
    word.text().unwrap_or(&word.raw)
}

/// Renders `argv` (argv0 first) in both forms.
pub(super) fn render(argv: &[Word], read_only: bool) -> Option<CommandLine> {
    let (head, args) = argv.split_first()?;
    let argv0 = shown(head);
    let plain_name = program_name(argv0);
    let base = Path::new(argv0)
        .file_name()
        .map_or_else(|| argv0.to_owned(), |n| n.to_string_lossy().into_owned());
    let plain = join(plain_name, args);
    let normalized = if base == "git" {
        join(&base, skip_git_globals(args))
    } else {
        join(&base, args)
    };
    Some(CommandLine {
        plain,
        normalized,
        read_only,
    })
}

fn join(name: &str, args: &[Word]) -> String {
    let mut out = name.to_owned();
    for arg in args {
        out.push(' ');
        out.push_str(shown(arg));
    }
    out
}

/// The arguments after git's global options (`-C DIR`, `-c k=v`, `--git-dir=…`, `-p` …).
fn skip_git_globals(args: &[Word]) -> &[Word] {
    let mut i = 0;
    while let Some(text) = args.get(i).map(shown) {
        if text == "--" {
            i += 1;
            break;
        }
        if !text.starts_with('-') {
            break;
        }
        i += if GIT_VALUED.contains(&text) { 2 } else { 1 };
    }
    args.get(i..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::words::word;
    use super::*;

    fn line(text: &str) -> CommandLine {
        let argv: Vec<Word> = text
            .split_whitespace()
            .map(|w| word(w, 0).unwrap_or_default())
            .collect();
        render(&argv, false).unwrap_or_else(|| panic!("no argv in {text:?}"))
    }

    #[test]
    fn forms() {
        let l = line("/usr/bin/touch t7");
        assert_eq!(
            (l.plain.as_str(), l.normalized.as_str()),
            ("touch t7", "touch t7")
        );
        let l = line("./rm -rf x");
        assert_eq!(
            (l.plain.as_str(), l.normalized.as_str()),
            ("./rm -rf x", "rm -rf x")
        );
        let l = line("git -C . -c a=b --git-dir=.git --no-pager push origin");
        assert_eq!(l.normalized, "git push origin");
        assert!(l.plain.starts_with("git -C ."), "{}", l.plain);
        assert_eq!(line("'git' push").normalized, "git push");
    }
}
