//! More programs that run another program, unwrapped like [`super::wrappers`] so deny rules
//! see the inner command:
//! - `flock [OPTS] FILE CMD…` (the lock file is a write; `flock FILE -c SCRIPT` is parsed);
//! - `ionice [-c C] [-n N] CMD`, `taskset [-c] MASK CMD`, `chrt PRIO CMD` (transparent;
//!   `-p PID` forms change another process: unknown);
//! - `chroot ROOT CMD`: destructive (runs as root), scope `chroot`, the working directory
//!   unknown inside (its paths are not ours);
//! - `setpriv`/`unshare`/`nsenter CMD`: unknown, inner command judged too; `runuser`, `sg`,
//!   `newgrp` opaque;
//! - `env -S STRING`: the string is split (parsed as a script) with the arguments after it.

use super::ShellClass;
use super::rules::{CdTo, Dispatch, Verdict, Wrap, WriteTo};
use super::words::Word;
use super::wrappers::skip_options;

pub(super) fn dispatch<'a>(name: &str, args: &'a [Word]) -> Option<Dispatch<'a>> {
    let leaf = |class: ShellClass, why: &str| Dispatch::Leaf(Verdict::new(class, name, why));
    let inner_or = |skip: usize, class: ShellClass, why: &str| {
        if skip >= args.len() {
            leaf(class, why)
        } else {
            Dispatch::Wrapper(Wrap {
                inner: args.get(skip..).unwrap_or_default(),
                ..Wrap::default()
            })
        }
    };
    Some(match name {
        "flock" => flock(args),
        "ionice" | "taskset" | "chrt" => {
            if args.iter().filter_map(Word::text).any(|t| {
                matches!(
                    t,
                    "-p" | "--pid" | "-P" | "--pgid" | "-u" | "--uid" | "-a" | "--all-tasks"
                )
            }) {
                return Some(leaf(ShellClass::Unknown, "changes another process"));
            }
            let valued: &[&str] = if name == "ionice" {
                &["-c", "--class", "-n", "--classdata"]
            } else {
                &[]
            };
            let skip = skip_options(args, valued);
            // taskset MASK COMMAND, chrt PRIORITY COMMAND.
            let skip = if name == "ionice" { skip } else { skip + 1 };
            inner_or(skip, ShellClass::ReadOnly, "shows a setting")
        }
        "chroot" => {
            let skip = skip_options(args, &["--userspec", "--groups"]) + 1; // the new root
            if skip >= args.len() {
                return Some(leaf(
                    ShellClass::Destructive,
                    "starts a shell in another root",
                ));
            }
            Dispatch::Wrapper(Wrap {
                inner: args.get(skip..).unwrap_or_default(),
                class: ShellClass::Destructive,
                reason: Some("chroot: runs in another root directory (as root)".to_owned()),
                scope: Some("chroot".to_owned()),
                // Paths inside the new root are not the paths we see.
                cd: Some(CdTo::Unknown),
                ..Wrap::default()
            })
        }
        "setpriv" | "unshare" | "nsenter" | "runuser" | "sg" | "newgrp" => {
            let valued: &[&str] = &[
                "--reuid",
                "--regid",
                "--groups",
                "--inh-caps",
                "--ambient-caps",
                "--bounding-set",
                "--securebits",
                "--pdeathsig",
                "--selinux-label",
                "--apparmor-profile",
                "-t",
                "--target",
                "-u",
                "-g",
                "--user",
                "--group",
            ];
            let skip = skip_options(args, valued);
            if skip >= args.len() || matches!(name, "runuser" | "sg" | "newgrp") {
                return Some(Dispatch::Leaf(
                    Verdict::new(ShellClass::Unknown, name, "changes privileges").opaque(),
                ));
            }
            Dispatch::Wrapper(Wrap {
                inner: args.get(skip..).unwrap_or_default(),
                class: ShellClass::Unknown,
                reason: Some(format!("{name}: changes privileges or namespaces")),
                scope: Some(name.to_owned()),
                ..Wrap::default()
            })
        }
        _ => return None,
    })
}

/// `env -S STRING …`: the string is split into the command (and more arguments follow).
pub(super) fn split_string(args: &[Word], at: usize, moved: bool) -> Dispatch<'_> {
    let opaque = |why: &str| Dispatch::Leaf(Verdict::new(ShellClass::Unknown, "env", why).opaque());
    let Some(flag) = args.get(at).and_then(Word::text) else {
        return opaque("-S string expands at run time");
    };
    let inline = flag
        .strip_prefix("--split-string=")
        .or_else(|| flag.strip_prefix("-S").filter(|r| !r.is_empty()));
    let (string, rest) = match inline {
        Some(text) => (Some(text), at + 1),
        None => (args.get(at + 1).and_then(Word::text), at + 2),
    };
    let (Some(string), Some(more)) = (
        string,
        super::rules::literals(args.get(rest..).unwrap_or_default()),
    ) else {
        return opaque("-S string expands at run time");
    };
    if moved || string.contains(['$', '\\']) {
        return opaque("-S string with -C, variables or escapes");
    }
    let mut source = string.to_owned();
    for word in more {
        source.push(' ');
        // Single-quoted, so the parsed script sees the same argument.
        source.push('\'');
        source.push_str(&word.replace('\'', "'\\''"));
        source.push('\'');
    }
    Dispatch::Script {
        program: "env".to_owned(),
        source,
    }
}

/// `flock [OPTIONS] FILE COMMAND…`, `flock FILE -c SCRIPT`, `flock FD`.
fn flock(args: &[Word]) -> Dispatch<'_> {
    let valued = ["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"];
    let skip = skip_options(args, &valued);
    let Some(file) = args.get(skip) else {
        return Dispatch::Leaf(Verdict::new(ShellClass::Unknown, "flock", "no lock file"));
    };
    let rest = args.get(skip + 1..).unwrap_or_default();
    if rest.is_empty() {
        // `flock FD`: locks an open descriptor.
        return Dispatch::Leaf(Verdict::new(
            ShellClass::ReadOnly,
            "flock",
            "locks a descriptor",
        ));
    }
    if matches!(rest.first().and_then(Word::text), Some("-c" | "--command")) {
        return match rest.get(1).and_then(Word::text) {
            Some(source) => Dispatch::Script {
                program: "flock".to_owned(),
                source: source.to_owned(),
            },
            None => Dispatch::Leaf(
                Verdict::new(ShellClass::Unknown, "flock", "script expands at run time").opaque(),
            ),
        };
    }
    let skip_inner = skip_options(rest, &valued);
    Dispatch::Wrapper(Wrap {
        inner: rest.get(skip_inner..).unwrap_or_default(),
        writes: vec![WriteTo::Word(file)],
        ..Wrap::default()
    })
}
