//! `git config` and `git -c`: which settings can make git run a program.
//!
//! Reading config is read-only; `--global`/`--system` writes are destructive and outside;
//! setting a key that git runs or that pulls in other config (see [`runs_programs`]) or
//! `--edit` is unknown; `--file FILE` writes FILE; other keys write the repository's config
//! (benign).

use super::ShellClass;
use super::rules::{Verdict, has_flag, option_value, positionals};
use super::words::Word;

/// Config keys whose value git runs (or that pull in other config, or point at hooks).
pub(super) fn runs_programs(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    const KEYS: &[&str] = &[
        "core.hookspath",
        "core.pager",
        "core.editor",
        "core.fsmonitor",
        "core.sshcommand",
        "core.gitproxy",
        "core.askpass",
        "core.alternaterefscommand",
        "core.worktree",
        "diff.external",
        "sequence.editor",
        "include.path",
        "gpg.program",
        "uploadpack.packobjectshook",
        "web.browser",
        "merge.tool",
        "diff.tool",
        "receive.procreceiverefs",
    ];
    const PREFIXES: &[&str] = &[
        "alias.",
        "filter.",
        "includeif.",
        "pager.",
        "credential.",
        "protocol.",
        "remote.",
        "url.",
        "mergetool.",
        "difftool.",
        "browser.",
    ];
    const SUFFIXES: &[&str] = &[
        ".command",
        ".cmd",
        ".program",
        ".helper",
        ".textconv",
        ".driver",
        ".path",
        ".hookspath",
        ".sshcommand",
        ".receivepack",
        ".uploadpack",
        ".proxy",
    ];
    KEYS.contains(&key.as_str())
        || PREFIXES.iter().any(|p| key.starts_with(p))
        || SUFFIXES.iter().any(|s| key.ends_with(s))
}

/// `-c` settings that cannot make git run another program.
pub(super) fn harmless_config(setting: &str) -> bool {
    let key = setting
        .split('=')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    key.starts_with("color.")
        || key.starts_with("advice.")
        || matches!(
            key.as_str(),
            "core.quotepath"
                | "user.name"
                | "user.email"
                | "init.defaultbranch"
                | "commit.gpgsign"
                | "tag.gpgsign"
                | "log.showsignature"
                | "diff.noprefix"
                | "safe.directory"
                | "core.autocrlf"
                | "pull.rebase"
                | "pull.ff"
                | "merge.conflictstyle"
                | "rebase.autosquash"
        )
}

pub(super) fn config<'a>(rest: &'a [Word], scope: &str) -> Verdict<'a> {
    let verdict = |class, why: &str| Verdict::new(class, scope, why.to_owned());
    let flag = |short: &[char], long: &[&str]| has_flag(rest, short, long);
    let reads = [
        "--list",
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--show-origin",
        "--show-scope",
        "--name-only",
    ];
    let writes = [
        "--unset",
        "--unset-all",
        "--add",
        "--replace-all",
        "--rename-section",
        "--remove-section",
        "--edit",
    ];
    let valued = ["-f", "--file", "--type", "--default", "--blob", "--comment"];
    let names = positionals(rest, &valued);
    let first = names.first().and_then(|w| w.text());
    let read = !flag(&['e'], &writes)
        && (flag(&['l'], &reads) || matches!(first, Some("get" | "list")) || names.len() == 1);
    if read {
        return verdict(ShellClass::ReadOnly, "reads configuration");
    }
    if flag(&[], &["--global", "--system"]) {
        return verdict(
            ShellClass::Destructive,
            "writes the user's or system's git config",
        )
        .outside();
    }
    if flag(&['e'], &["--edit"]) {
        return verdict(ShellClass::Unknown, "opens an editor on the configuration");
    }
    // `git config set KEY VALUE` (git 2.46+) names the key after the verb.
    let key = match first {
        Some("set" | "unset") => names.get(1),
        _ => names.first(),
    };
    match key.map(|w| w.text()) {
        Some(Some(key)) if runs_programs(key) => {
            return verdict(
                ShellClass::Unknown,
                &format!("sets {key}, which makes git run a program"),
            );
        }
        Some(None) => return verdict(ShellClass::Unknown, "key expands at run time"),
        _ => {}
    }
    if let Some(file) = option_value(rest, &["-f"], &["--file"]) {
        return Verdict::new(ShellClass::Benign, scope, "writes a config file").writing([file]);
    }
    verdict(ShellClass::Benign, "writes the repository's config")
}
