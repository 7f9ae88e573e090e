//! How rules match commands (`bash`, and `process start`, which bash rules cover too).
//!
//! A pattern is a prefix pattern: `*` matches any run of characters, and a pattern without
//! `*` matches the command itself or the command followed by arguments (`git push` matches
//! `git push origin`). It is matched against:
//! - the raw command text, and each part of it between `;`, `&`, `|` and newlines
//!   (so a command the parser cannot read is still caught by a deny or ask rule), and
//! - every simple command of the parsed script, wrappers unwrapped (`env`, `timeout`,
//!   `bash -c`, `$(…)`, subshells, `if`/`for` bodies …), rendered as a command line in two
//!   forms (`shell::CommandLine`): `plain` and `normalized` (argv0's basename, git's global
//!   options dropped: `git -C . push` → `git push`).
//!
//! Deny and ask rules match when ANY of those matches, and always when the command has a
//! part the parser cannot see (a computed program name `$T a`, a shell reading its script
//! from stdin `… | bash`, `bash <<< …`, a parse error). An allow rule only counts when the
//! script was fully parsed and EVERY simple command that is not read-only is matched (in
//! its `plain` form) by some allow rule; otherwise the call falls through to the mode and
//! the classifier. Allow rules of the config and of the workspace combine.
//!
//! Running a command without the OS sandbox needs more ([`allows_unsandboxed`]): the
//! script fully parsed, and either a `sandbox = false` allow rule whose pattern (without
//! `*`) is the whole command text, or every simple command that is not read-only (every
//! one, when all are) matched by a `sandbox = false` allow rule. Other allow rules never
//! count for it.

use super::rules::{Rule, RuleDecision, RuleSet, applies};
use super::shell::CommandLine;

/// What a command call is, for matching.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandFacts<'a> {
    pub(crate) raw: &'a str,
    pub(crate) lines: &'a [CommandLine],
    /// Everything that runs was parsed and seen (`Classification::complete`).
    pub(crate) complete: bool,
}

/// The strongest decision of the rules in `sets` (deny > ask > allow) for `tool` running
/// `facts`, with the rule that made it (for allow: the rule covering the first line).
pub(crate) fn decide<'r>(
    sets: &[&'r RuleSet],
    tool: &str,
    facts: &CommandFacts<'_>,
) -> Option<(RuleDecision, &'r Rule)> {
    let rules = || {
        sets.iter()
            .flat_map(|set| set.rules())
            .filter(|r| applies(&r.tool, tool))
    };
    // Something ran unseen (`$T a`, `… | bash`, a parse error): it could be anything a
    // deny or ask rule of this tool names, so every such rule applies (not `*` rules, which
    // are mostly path globs such as `secrets/**`).
    let blocking = rules()
        .filter(|r| {
            r.decision != RuleDecision::Allow
                && ((!facts.complete && r.tool != "*") || matches_any(&r.pattern, facts))
        })
        .max_by_key(|r| r.decision);
    if let Some(rule) = blocking {
        return Some((rule.decision, rule));
    }
    if !facts.complete {
        return None;
    }
    let mut first = None;
    for line in facts.lines.iter().filter(|l| !l.read_only) {
        let allow = rules()
            .find(|r| r.decision == RuleDecision::Allow && prefix_match(&r.pattern, &line.plain))?;
        first.get_or_insert(allow);
    }
    first.map(|rule| (RuleDecision::Allow, rule))
}

/// The `sandbox = false` allow rule that lets `tool` run `facts` without the OS sandbox, if
/// the rules in `sets` allow that (see the module header). Deny and ask rules are the
/// engine's business before this is asked.
pub(crate) fn allows_unsandboxed<'r>(
    sets: &[&'r RuleSet],
    tool: &str,
    facts: &CommandFacts<'_>,
) -> Option<&'r Rule> {
    if !facts.complete {
        return None;
    }
    let rules = || {
        sets.iter()
            .flat_map(|set| set.rules())
            .filter(|r| r.unsandboxed() && applies(&r.tool, tool))
    };
    let whole = facts.raw.trim();
    if let Some(rule) = rules().find(|r| !r.pattern.contains('*') && r.pattern == whole) {
        return Some(rule);
    }
    let changing: Vec<&CommandLine> = facts.lines.iter().filter(|l| !l.read_only).collect();
    let lines = if changing.is_empty() {
        facts.lines.iter().collect()
    } else {
        changing
    };
    let mut first = None;
    for line in lines {
        let rule = rules().find(|r| prefix_match(&r.pattern, &line.plain))?;
        first.get_or_insert(rule);
    }
    first
}

fn matches_any(pattern: &str, facts: &CommandFacts<'_>) -> bool {
    command_parts(facts.raw).any(|part| prefix_match(pattern, part))
        || facts.lines.iter().any(|line| {
            prefix_match(pattern, &line.plain) || prefix_match(pattern, &line.normalized)
        })
}

/// The full command line and each part between `&&`, `||`, `;`, `|` and newlines, trimmed.
fn command_parts(command: &str) -> impl Iterator<Item = &str> {
    let parts = command
        .split(['\n', ';', '|', '&'])
        .map(str::trim)
        .filter(|p| !p.is_empty());
    std::iter::once(command.trim()).chain(parts)
}

/// `*` matches any run of characters; a pattern without `*` matches the command itself or
/// the command followed by arguments (`git push` matches `git push origin main`).
pub(crate) fn prefix_match(pattern: &str, text: &str) -> bool {
    if !pattern.contains('*') {
        return text == pattern
            || text
                .strip_prefix(pattern)
                .is_some_and(|rest| rest.starts_with(char::is_whitespace));
    }
    wildcard(pattern.as_bytes(), text.as_bytes())
}

/// Iterative `*`-only wildcard match with backtracking to the last star.
fn wildcard(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::shell::classify;

    fn rule(tool: &str, pattern: &str, decision: RuleDecision) -> Rule {
        Rule {
            tool: tool.into(),
            pattern: pattern.into(),
            host: None,
            sandbox: None,
            decision,
        }
    }

    fn decision(set: &RuleSet, tool: &str, command: &str) -> Option<RuleDecision> {
        let c = classify(command, Path::new("/ws"), Path::new("/ws"));
        let facts = CommandFacts {
            raw: command,
            lines: &c.commands,
            complete: c.complete,
        };
        decide(&[set], tool, &facts).map(|(d, _)| d)
    }

    #[test]
    fn deny_rules_see_through_wrappers_and_nesting() {
        let set = RuleSet::new(&[
            rule("bash", "touch*", RuleDecision::Deny),
            rule("bash", "git push*", RuleDecision::Deny),
        ])
        .unwrap();
        for command in [
            "touch t0",
            "env touch t1",
            "bash -c \"touch t2\"",
            "(touch t3)",
            "FOO=1 touch t4",
            "echo $(touch t5)",
            "echo `touch t5b`",
            "timeout 5 touch t6",
            "/usr/bin/touch t7",
            "./touch t7b",
            "ls; touch t8",
            "if true; then touch t9; fi",
            "for f in a; do touch $f; done",
            "nice -n 5 nohup touch t11",
            "sudo touch t12",
            "xargs touch < list",
            "find . -exec touch {} \\;",
            "git -C . push",
            "git -c a.b=c --no-pager push origin",
            "git --git-dir=.git push",
            "cd sub && git push",
            "sh -c 'bash -c \"touch t13\"'",
            // Programs the parser cannot see, and more wrappers.
            "T=touch; $T a",
            "echo touch a | bash",
            "bash <<< \"touch a\"",
            "sh -s < script.sh",
            "bash < script.sh",
            "env -S \"touch a\"",
            "env --split-string='touch a' b",
            "flock F touch a",
            "flock -w 5 F -c 'touch a'",
            "ionice -c 3 touch a",
            "chroot / touch a",
            "setpriv --reuid=1000 touch a",
            "taskset -c 0 touch a",
            "chrt 5 touch a",
        ] {
            assert_eq!(
                decision(&set, "bash", command),
                Some(RuleDecision::Deny),
                "{command}"
            );
        }
        // bash rules cover `process start`.
        assert_eq!(
            decision(&set, "process", "touch t10"),
            Some(RuleDecision::Deny)
        );
        for command in [
            "ls",
            "git status",
            "echo touch",
            "git pull",
            "flock F ls",
            "env -S 'ls -l'",
        ] {
            assert_eq!(decision(&set, "bash", command), None, "{command}");
        }
    }

    #[test]
    fn unparsable_commands_match_deny_by_raw_prefix_but_never_allow() {
        let set = RuleSet::new(&[
            rule("bash", "touch*", RuleDecision::Deny),
            rule("bash", "rm*", RuleDecision::Allow),
        ])
        .unwrap();
        assert_eq!(
            decision(&set, "bash", "touch x; if"),
            Some(RuleDecision::Deny)
        );
        // Incomplete commands: the deny rule applies whatever they name.
        let deny = Some(RuleDecision::Deny);
        assert_eq!(decision(&set, "bash", "rm x; if then"), deny);
        assert_eq!(decision(&set, "bash", "rm $(eval \"$X\")"), deny);
        assert_eq!(decision(&set, "bash", "$CMD rm"), deny);
        let allow_only = RuleSet::new(&[
            rule("bash", "rm*", RuleDecision::Allow),
            rule("*", "secrets/**", RuleDecision::Deny),
        ])
        .unwrap();
        assert_eq!(decision(&allow_only, "bash", "rm x; if then"), None);
        assert_eq!(decision(&allow_only, "bash", "$CMD rm"), None);
    }

    #[test]
    fn an_allow_rule_must_cover_every_simple_command() {
        let set = RuleSet::new(&[
            rule("bash", "rm", RuleDecision::Allow),
            rule("bash", "cargo*", RuleDecision::Allow),
        ])
        .unwrap();
        let allow = Some(RuleDecision::Allow);
        assert_eq!(decision(&set, "bash", "rm -rf build2"), allow);
        assert_eq!(decision(&set, "bash", "rm -f a.txt; git clean -fdx"), None);
        assert_eq!(decision(&set, "bash", "rm x && curl x | sh"), None);
        assert_eq!(decision(&set, "bash", "rm x | tee out"), None);
        assert_eq!(
            decision(&set, "bash", "echo $(git clean -fdx) && rm x"),
            None
        );
        assert_eq!(decision(&set, "bash", "sudo rm -rf build"), None);
        assert_eq!(decision(&set, "bash", "./rm x"), None);
        // Read-only parts need no allow rule; several rules can cover one command.
        assert_eq!(decision(&set, "bash", "cd src && rm -rf x"), allow);
        assert_eq!(decision(&set, "bash", "cargo build && rm -rf x"), allow);
        assert_eq!(decision(&set, "bash", "ls | wc -l"), None);
    }

    #[test]
    fn deny_and_ask_win_over_allow_in_any_part() {
        let set = RuleSet::new(&[
            rule("bash", "git*", RuleDecision::Allow),
            rule("bash", "git push*", RuleDecision::Ask),
        ])
        .unwrap();
        assert_eq!(
            decision(&set, "bash", "git status && git -C . push"),
            Some(RuleDecision::Ask)
        );
        assert_eq!(
            decision(&set, "bash", "git pull"),
            Some(RuleDecision::Allow)
        );
        assert_eq!(decision(&set, "write", "git push"), None);
    }

    #[test]
    fn a_pattern_without_star_matches_at_a_word_boundary() {
        assert!(prefix_match("git push", "git push origin"));
        assert!(prefix_match("git push", "git push"));
        assert!(!prefix_match("git push", "git pushy"));
        assert!(wildcard(b"rm -rf *", b"rm -rf build"));
        assert!(wildcard(b"*secret*", b"cat my.secret.txt"));
        assert!(!wildcard(b"rm *", b"git rm x"));
    }
}
