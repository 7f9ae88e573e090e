//! Stored rules: `[[rules]]` in config.toml and in the workspace's `.amber/rules.toml`.
//!
//! A rule is `{tool, pattern, decision}`. `tool` is a tool name or `*`. For command tools
//! (`bash`, `process`) the pattern is a prefix pattern over each part of the command line
//! (`git push*`); for file tools it is a glob over the workspace-relative path
//! (`secrets/**`). When several rules match, the strongest wins: deny > ask > allow.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    Allow,
    Ask,
    Deny,
}

/// One rule as written in TOML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub tool: String,
    pub pattern: String,
    pub decision: RuleDecision,
}

/// A rules file: `[[rules]]` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesFile {
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("invalid rule pattern `{pattern}` for tool `{tool}`: {message}")]
    Pattern {
        tool: String,
        pattern: String,
        message: String,
    },
    #[error("cannot read rules file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("cannot write rules file {path}: {message}")]
    Write { path: PathBuf, message: String },
}

/// What a tool call is about, for matching.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// A command line (bash, process).
    Command(&'a str),
    /// A workspace-relative path (file tools).
    Path(&'a str),
    /// Nothing to match a pattern against; only `*` patterns apply.
    None,
}

#[derive(Debug, Clone)]
struct Compiled {
    rule: Rule,
    glob: GlobMatcher,
}

/// Compiled rules, ready to match.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Compiled>,
}

impl RuleSet {
    pub fn new(rules: &[Rule]) -> Result<RuleSet, RuleError> {
        let rules = rules
            .iter()
            .map(|rule| {
                let glob = Glob::new(&rule.pattern)
                    .map_err(|e| RuleError::Pattern {
                        tool: rule.tool.clone(),
                        pattern: rule.pattern.clone(),
                        message: e.kind().to_string(),
                    })?
                    .compile_matcher();
                Ok(Compiled {
                    rule: rule.clone(),
                    glob,
                })
            })
            .collect::<Result<_, RuleError>>()?;
        Ok(RuleSet { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The strongest decision among matching rules, with the rule that made it.
    pub fn decide(&self, tool: &str, subject: Subject<'_>) -> Option<(RuleDecision, &Rule)> {
        self.rules
            .iter()
            .filter(|c| c.rule.tool == "*" || c.rule.tool == tool)
            .filter(|c| matches(c, subject))
            .map(|c| (c.rule.decision, &c.rule))
            .max_by_key(|(decision, _)| *decision)
    }
}

fn matches(compiled: &Compiled, subject: Subject<'_>) -> bool {
    let pattern = compiled.rule.pattern.as_str();
    match subject {
        Subject::Command(command) => command_parts(command).any(|part| prefix_match(pattern, part)),
        Subject::Path(path) => compiled.glob.is_match(path),
        Subject::None => pattern == "*" || pattern == "**",
    }
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
fn prefix_match(pattern: &str, text: &str) -> bool {
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

/// The workspace's rules file, re-read when it changes on disk.
#[derive(Debug)]
pub struct WorkspaceRules {
    path: PathBuf,
    loaded: Option<(Option<SystemTime>, RuleSet)>,
}

impl WorkspaceRules {
    pub fn new(workspace: &Path) -> Self {
        Self {
            path: workspace.join(".amber").join("rules.toml"),
            loaded: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current rules; a missing file is an empty set, a broken one an error (callers
    /// treat it as "ask", never as "allow").
    pub fn current(&mut self) -> Result<&RuleSet, RuleError> {
        let mtime = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        let fresh = matches!(&self.loaded, Some((seen, _)) if *seen == mtime);
        if !fresh {
            let set = match mtime {
                None => RuleSet::default(),
                Some(_) => RuleSet::new(&read_file(&self.path)?.rules)?,
            };
            self.loaded = Some((mtime, set));
        }
        let (_, set) = self
            .loaded
            .get_or_insert_with(|| (mtime, RuleSet::default()));
        Ok(set)
    }

    /// Appends a rule (an `allow_always` answer) to the file, creating it if needed.
    pub fn append(&mut self, rule: Rule) -> Result<(), RuleError> {
        let mut file = match std::fs::metadata(&self.path) {
            Ok(_) => read_file(&self.path)?,
            Err(_) => RulesFile::default(),
        };
        if !file.rules.contains(&rule) {
            file.rules.push(rule);
        }
        let write_err = |message: String| RuleError::Write {
            path: self.path.clone(),
            message,
        };
        let text = toml::to_string_pretty(&file).map_err(|e| write_err(e.to_string()))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| write_err(e.to_string()))?;
        }
        let header = "# amber: rules for this workspace (deny > ask > allow).\n\
                      # `allow_always` answers are appended here.\n\n";
        std::fs::write(&self.path, format!("{header}{text}"))
            .map_err(|e| write_err(e.to_string()))?;
        self.loaded = None;
        Ok(())
    }
}

fn read_file(path: &Path) -> Result<RulesFile, RuleError> {
    let read_err = |message: String| RuleError::Read {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| read_err(e.to_string()))?;
    toml::from_str(&text).map_err(|e| read_err(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rule(tool: &str, pattern: &str, decision: RuleDecision) -> Rule {
        Rule {
            tool: tool.into(),
            pattern: pattern.into(),
            decision,
        }
    }

    #[test]
    fn command_prefix_patterns_match_any_part() {
        let set = RuleSet::new(&[rule("bash", "git push*", RuleDecision::Ask)]).unwrap();
        let ask = Some(RuleDecision::Ask);
        let d = |c| set.decide("bash", Subject::Command(c)).map(|(d, _)| d);
        assert_eq!(d("git push origin main"), ask);
        assert_eq!(d("cd x && git push"), ask);
        assert_eq!(d("git status | cat; git push -f"), ask);
        assert_eq!(d("git pull"), None);
        assert_eq!(set.decide("write", Subject::Command("git push")), None);
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

    #[test]
    fn path_globs_and_precedence_deny_over_ask_over_allow() {
        let set = RuleSet::new(&[
            rule("write", "**", RuleDecision::Allow),
            rule("write", "secrets/**", RuleDecision::Deny),
            rule("*", "docs/**", RuleDecision::Ask),
        ])
        .unwrap();
        let d = |tool, p| set.decide(tool, Subject::Path(p)).map(|(d, _)| d);
        assert_eq!(d("write", "secrets/key.pem"), Some(RuleDecision::Deny));
        assert_eq!(d("write", "src/main.rs"), Some(RuleDecision::Allow));
        assert_eq!(d("write", "docs/a.md"), Some(RuleDecision::Ask));
        assert_eq!(d("edit", "docs/a.md"), Some(RuleDecision::Ask));
        assert_eq!(d("edit", "src/a.rs"), None);
    }

    #[test]
    fn an_invalid_glob_is_reported_with_its_rule() {
        let err = RuleSet::new(&[rule("write", "a[", RuleDecision::Deny)]).unwrap_err();
        assert!(err.to_string().contains("a["), "{err}");
    }

    #[test]
    fn workspace_rules_reload_when_the_file_changes_and_append_persists() {
        let ws = tempfile::tempdir().unwrap();
        let mut rules = WorkspaceRules::new(ws.path());
        assert!(rules.current().unwrap().is_empty());
        rules
            .append(rule("bash", "rm", RuleDecision::Allow))
            .unwrap();
        let got = rules
            .current()
            .unwrap()
            .decide("bash", Subject::Command("rm x"));
        assert_eq!(got.map(|(d, _)| d), Some(RuleDecision::Allow));
        let text = std::fs::read_to_string(ws.path().join(".amber/rules.toml")).unwrap();
        assert!(
            text.contains("[[rules]]") && text.contains("decision = \"allow\""),
            "{text}"
        );

        std::fs::write(
            rules.path(),
            "[[rules]]\ntool='bash'\npattern='rm'\ndecision='deny'\n",
        )
        .unwrap();
        // Make sure the mtime differs even on coarse-grained filesystems.
        let later = SystemTime::now() + std::time::Duration::from_secs(2);
        std::fs::File::options()
            .write(true)
            .open(rules.path())
            .unwrap()
            .set_modified(later)
            .unwrap();
        let got = rules
            .current()
            .unwrap()
            .decide("bash", Subject::Command("rm x"));
        assert_eq!(got.map(|(d, _)| d), Some(RuleDecision::Deny));
    }
}
