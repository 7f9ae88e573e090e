//! The rules in force for one call: the config's rule set and the workspace's (left out when
//! its file is broken), asked together. A command is judged by the command rules of its tool
//! and by the path rules of the file tools: `write`/`edit` rules for what it writes, `read`
//! rules for what it reads.

use super::command_rules::{self, CommandFacts};
use super::engine::Rules;
use super::rules::{Rule, RuleDecision, RuleSet, Subject, applies};
use super::target::{CommandTarget, FileTarget, ReadCheck, Target};

/// File tools whose path rules also govern what commands write.
const WRITE_TOOLS: &[&str] = &["write", "edit", "apply_patch"];
/// The file tool whose path rules also govern what commands read.
const READ_TOOL: &str = "read";

impl<'a> Rules<'a> {
    fn sets(&self) -> Vec<&'a RuleSet> {
        let mut sets = vec![self.config];
        if let Ok(set) = &self.workspace {
            sets.push(set);
        }
        sets
    }

    /// The strongest rule (deny > ask > allow) matching `tool` on `target`.
    pub(crate) fn strongest(&self, tool: &str, target: &Target) -> Option<(RuleDecision, Rule)> {
        let subject = match target {
            Target::Command(c) => return self.strongest_for_command(tool, c),
            Target::Path { relative, .. } => Subject::Path(relative),
            Target::Host(host) => Subject::Host(host),
            Target::Files(files) if !files.is_empty() => {
                return self.strongest_for_files(tool, files);
            }
            Target::Files(_) | Target::Nothing => Subject::None,
        };
        self.sets()
            .iter()
            .filter_map(|set| set.decide(tool, subject))
            .max_by_key(|(decision, _)| *decision)
            .map(|(d, r)| (d, r.clone()))
    }

    /// The strongest rule over every file a patch touches: each is judged as its own path.
    fn strongest_for_files(
        &self,
        tool: &str,
        files: &[FileTarget],
    ) -> Option<(RuleDecision, Rule)> {
        let sets = self.sets();
        files
            .iter()
            .flat_map(|file| {
                sets.iter()
                    .filter_map(|set| set.decide(tool, Subject::Path(&file.relative)))
            })
            .max_by_key(|(decision, _)| *decision)
            .map(|(d, r)| (d, r.clone()))
    }

    /// The command rules' decision, unless a path rule on what the command writes or reads
    /// is stronger.
    fn strongest_for_command(&self, tool: &str, c: &CommandTarget) -> Option<(RuleDecision, Rule)> {
        let sets = self.sets();
        let facts = CommandFacts {
            raw: &c.command,
            lines: &c.lines,
            complete: c.complete,
        };
        let command = command_rules::decide(&sets, tool, &facts).map(|(d, r)| (d, r.clone()));
        match (command, path_rules_on_command(&sets, c)) {
            (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
            (a, b) => b.or(a),
        }
    }

    /// The `sandbox = false` allow rule that lets `tool` run this command without the OS
    /// sandbox (`command_rules::allows_unsandboxed`), if any.
    pub(crate) fn unsandboxed_rule(&self, tool: &str, c: &CommandTarget) -> Option<Rule> {
        let facts = CommandFacts {
            raw: &c.command,
            lines: &c.lines,
            complete: c.complete,
        };
        command_rules::allows_unsandboxed(&self.sets(), tool, &facts).cloned()
    }

    /// Whether a `read` allow rule covers this read (and no `read` deny or ask rule matches
    /// it). Outside the workspace only rules naming an absolute or `~/` path count: a
    /// workspace glob such as `**` never reaches out.
    pub(crate) fn read_allowed(&self, read: &ReadCheck, outside: bool) -> bool {
        let sets = self.sets();
        let applies =
            |r: &Rule| !outside || r.pattern.starts_with('/') || r.pattern.starts_with('~');
        !read.subjects.is_empty()
            && read.subjects.iter().any(|subject| {
                sets.iter()
                    .filter_map(|set| set.decide_where(READ_TOOL, Subject::Path(subject), applies))
                    .max_by_key(|(d, _)| *d)
                    .is_some_and(|(d, _)| d == RuleDecision::Allow)
            })
    }

    /// The first deny rule of a file tool that writes, if any.
    pub(crate) fn write_deny_rule(&self) -> Option<Rule> {
        self.sets()
            .iter()
            .flat_map(|set| set.rules())
            .find(|r| {
                r.decision == RuleDecision::Deny && WRITE_TOOLS.iter().any(|t| applies(&r.tool, t))
            })
            .cloned()
    }
}

/// The strongest deny or ask path rule on what a command writes (the file tools that write)
/// and reads (`read`); allowing a command stays the command rules' business.
fn path_rules_on_command(sets: &[&RuleSet], c: &CommandTarget) -> Option<(RuleDecision, Rule)> {
    let on_writes = c.written.iter().flat_map(|path| {
        sets.iter().flat_map(move |set| {
            WRITE_TOOLS
                .iter()
                .filter_map(move |t| set.decide(t, Subject::Path(path)))
        })
    });
    let on_reads = c.reads.iter().flat_map(|read| {
        read.subjects.iter().flat_map(|subject| {
            sets.iter()
                .filter_map(move |set| set.decide(READ_TOOL, Subject::Path(subject)))
        })
    });
    on_writes
        .chain(on_reads)
        .filter(|(d, _)| *d != RuleDecision::Allow)
        .max_by_key(|(d, _)| *d)
        .map(|(d, r)| (d, r.clone()))
}
