//! Stored rules: `[[rules]]` in config.toml and in the workspace's `.amber/rules.toml`.
//!
//! A rule is `{tool, pattern, decision}`. `tool` is a tool name or `*`; a `bash` rule also
//! covers `process` (it starts commands too) and a `write` rule also covers `edit` and
//! `apply_patch` (they modify files). For command tools the pattern is a prefix pattern over the command's
//! parts ([`super::command_rules`]: `git push*`); for file tools it is a glob over the
//! workspace-relative path (`secrets/**`; a pattern ending in `/**` also matches the
//! directory itself). A `fetch` rule names a `host` instead of a pattern: the exact host
//! (`docs.rs`), or a glob over it (`*.example.com` matches every subdomain, not
//! `example.com` itself), compared case-insensitively; a `fetch` rule with `pattern = "*"`
//! covers every host. When several rules match, the strongest wins: deny > ask > allow.
//!
//! A `bash`/`process` allow rule with `sandbox = false` also lets the commands it covers run
//! without the OS sandbox (`command_rules::allows_unsandboxed`); no other rule ever does.
//! `command` is another name for `pattern` (the spelling for command rules).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::{Glob, GlobBuilder, GlobMatcher};

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
    /// A command prefix pattern or a path glob; empty in a `host` rule.
    #[serde(default, skip_serializing_if = "String::is_empty", alias = "command")]
    pub pattern: String,
    /// The host a `fetch` rule is about (exact, or a glob such as `*.example.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `Some(false)` on a `bash`/`process` allow rule: the commands it covers may also run
    /// without the OS sandbox. Absent (or `true`): the rule never allows an unsandboxed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    pub decision: RuleDecision,
}

impl Rule {
    /// The rule as reasons show it: `bash git push*`, `fetch host=docs.rs`.
    pub fn shown(&self) -> String {
        let shown = match &self.host {
            Some(host) => format!("{} host={host}", self.tool),
            None => format!("{} {}", self.tool, self.pattern),
        };
        if self.unsandboxed() {
            format!("{shown} (sandbox = false)")
        } else {
            shown
        }
    }

    /// The rule allows the commands it covers to run without the OS sandbox.
    pub(crate) fn unsandboxed(&self) -> bool {
        self.sandbox == Some(false) && self.decision == RuleDecision::Allow
    }
}

/// A rules file: `[[rules]]` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rules: Vec<Rule>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("invalid rule pattern `{pattern}` for tool `{tool}`: {message}")]
    Pattern {
        tool: String,
        pattern: String,
        message: String,
    },
    #[error("invalid rule for tool `{tool}`: {message}")]
    Shape { tool: String, message: String },
    #[error("cannot read rules file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("cannot write rules file {path}: {message}")]
    Write { path: PathBuf, message: String },
}

/// Whether a rule written for `rule_tool` applies to a call of `tool`.
pub(crate) fn applies(rule_tool: &str, tool: &str) -> bool {
    rule_tool == "*"
        || rule_tool == tool
        || (rule_tool == "bash" && tool == "process")
        || (rule_tool == "write" && (tool == "edit" || tool == "apply_patch"))
}

/// What a file tool's call is about, for matching (commands match through
/// [`crate::command_rules::decide`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// A workspace-relative path (file tools).
    Path(&'a str),
    /// The host a `fetch` call reaches.
    Host(&'a str),
    /// Nothing to match a pattern against; only `*` patterns apply.
    None,
}

#[derive(Debug, Clone)]
struct Compiled {
    rule: Rule,
    /// Over the path for pattern rules, over the host for `host` rules.
    glob: GlobMatcher,
    /// For `dir/**`: matches `dir` itself.
    dir: Option<GlobMatcher>,
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
            .map(compile)
            .collect::<Result<_, RuleError>>()?;
        Ok(RuleSet { rules })
    }

    /// Every rule, in file order.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|c| &c.rule)
    }

    /// Only the deny and ask rules: what an untrusted rules file may still say (it can
    /// narrow what runs, never widen it).
    pub fn restrictions(&self) -> RuleSet {
        RuleSet {
            rules: self
                .rules
                .iter()
                .filter(|c| c.rule.decision != RuleDecision::Allow)
                .cloned()
                .collect(),
        }
    }

    /// Whether any rule allows something (and so needs trust to count).
    pub fn allows_anything(&self) -> bool {
        self.rules
            .iter()
            .any(|c| c.rule.decision == RuleDecision::Allow)
    }

    /// The strongest decision among matching rules, with the rule that made it.
    pub(crate) fn decide(&self, tool: &str, subject: Subject<'_>) -> Option<(RuleDecision, &Rule)> {
        self.rules
            .iter()
            .filter(|c| applies(&c.rule.tool, tool))
            .filter(|c| matches(c, subject))
            .map(|c| (c.rule.decision, &c.rule))
            .max_by_key(|(decision, _)| *decision)
    }

    /// Like [`RuleSet::decide`], among the rules `keep` accepts.
    pub(crate) fn decide_where(
        &self,
        tool: &str,
        subject: Subject<'_>,
        keep: impl Fn(&Rule) -> bool,
    ) -> Option<(RuleDecision, &Rule)> {
        self.rules
            .iter()
            .filter(|c| applies(&c.rule.tool, tool) && keep(&c.rule))
            .filter(|c| matches(c, subject))
            .map(|c| (c.rule.decision, &c.rule))
            .max_by_key(|(decision, _)| *decision)
    }

    /// Whether a deny rule for any of `tools` matches the workspace-relative `path`.
    pub fn denies_path(&self, tools: &[&str], path: &str) -> bool {
        self.rules.iter().any(|c| {
            c.rule.decision == RuleDecision::Deny
                && tools.iter().any(|t| applies(&c.rule.tool, t))
                && matches(c, Subject::Path(path))
        })
    }
}

/// The tool whose rules may name a `host`.
const HOST_TOOL: &str = "fetch";
/// The tools whose rules may say `sandbox`: they start commands.
const SANDBOX_TOOLS: &[&str] = &["bash", "process"];

/// Checks a rule's shape and compiles its glob.
fn compile(rule: &Rule) -> Result<Compiled, RuleError> {
    let shape = |message: &str| RuleError::Shape {
        tool: rule.tool.clone(),
        message: message.to_owned(),
    };
    let invalid = |pattern: &str, e: globset::Error| RuleError::Pattern {
        tool: rule.tool.clone(),
        pattern: pattern.to_owned(),
        message: e.kind().to_string(),
    };
    if let Some(sandbox) = rule.sandbox {
        if !SANDBOX_TOOLS.contains(&rule.tool.as_str()) {
            return Err(shape("`sandbox` is for `bash` and `process` rules only"));
        }
        if !sandbox && rule.decision != RuleDecision::Allow {
            return Err(shape(
                "`sandbox = false` is for allow rules only (it allows a command to run without the OS sandbox)",
            ));
        }
    }
    if let Some(host) = &rule.host {
        if rule.tool != HOST_TOOL {
            return Err(shape("`host` is for `fetch` rules only"));
        }
        if !rule.pattern.is_empty() {
            return Err(shape("a rule names a `pattern` or a `host`, not both"));
        }
        if host.trim().is_empty() {
            return Err(shape("`host` is empty"));
        }
        let glob = GlobBuilder::new(host.trim().trim_end_matches('.'))
            .case_insensitive(true)
            .build()
            .map_err(|e| invalid(host, e))?
            .compile_matcher();
        return Ok(Compiled {
            rule: rule.clone(),
            glob,
            dir: None,
        });
    }
    if rule.pattern.is_empty() {
        return Err(shape(
            "a rule needs a `pattern` (or, for `fetch`, a `host`)",
        ));
    }
    let glob = Glob::new(&rule.pattern)
        .map_err(|e| invalid(&rule.pattern, e))?
        .compile_matcher();
    let dir = rule
        .pattern
        .strip_suffix("/**")
        .filter(|d| !d.is_empty())
        .and_then(|d| Glob::new(d).ok())
        .map(|g| g.compile_matcher());
    Ok(Compiled {
        rule: rule.clone(),
        glob,
        dir,
    })
}

fn matches(compiled: &Compiled, subject: Subject<'_>) -> bool {
    let pattern = compiled.rule.pattern.as_str();
    let whole_tool = pattern == "*" || pattern == "**";
    match (subject, compiled.rule.host.is_some()) {
        (Subject::Host(host), true) => compiled.glob.is_match(host.trim_end_matches('.')),
        // A pattern rule says nothing of hosts, unless it covers the whole tool.
        (Subject::Host(_), false) | (Subject::None, false) => whole_tool,
        (Subject::Path(path), false) => {
            compiled.glob.is_match(path) || compiled.dir.as_ref().is_some_and(|d| d.is_match(path))
        }
        (Subject::Path(_) | Subject::None, true) => false,
    }
}

/// The workspace's rules file as last read: its rules, and the blake3 hash of the bytes
/// they were parsed from (`None` when there is no file), so a caller can tell whether that
/// version was trusted before it lets the allow rules count.
#[derive(Debug, Clone, Default)]
pub struct LoadedRules {
    pub hash: Option<String>,
    all: RuleSet,
    restrictions: RuleSet,
}

impl LoadedRules {
    /// Parses one version of a rules file (`bytes`, as read).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<LoadedRules, RuleError> {
        let read_err = |message: String| RuleError::Read {
            path: path.to_owned(),
            message,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| read_err(e.to_string()))?;
        let file: RulesFile = toml::from_str(text).map_err(|e| read_err(e.to_string()))?;
        let all = RuleSet::new(&file.rules)?;
        Ok(LoadedRules {
            hash: Some(blake3::hash(bytes).to_hex().to_string()),
            restrictions: all.restrictions(),
            all,
        })
    }

    /// The rules in force: all of them once this version is trusted, else only its deny and
    /// ask rules.
    pub fn in_force(&self, trusted: bool) -> &RuleSet {
        if trusted {
            &self.all
        } else {
            &self.restrictions
        }
    }

    /// Every rule of the file, trusted or not (to show what trusting it would allow).
    pub fn all(&self) -> &RuleSet {
        &self.all
    }
}

/// The workspace's rules file, re-read when it changes on disk.
#[derive(Debug)]
pub struct WorkspaceRules {
    path: PathBuf,
    /// The file's (mtime, length) when it was read, and what was read.
    loaded: Option<(Option<(SystemTime, u64)>, LoadedRules)>,
}

impl WorkspaceRules {
    pub fn new(workspace: &Path) -> Self {
        Self {
            path: workspace.join(".amber").join("rules.toml"),
            loaded: None,
        }
    }

    /// The rules file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current rules; a missing file is an empty set, a broken one an error (callers
    /// treat it as "ask", never as "allow").
    pub fn current(&mut self) -> Result<&LoadedRules, RuleError> {
        let stamp = std::fs::metadata(&self.path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        let fresh = matches!(&self.loaded, Some((seen, _)) if *seen == stamp);
        if !fresh {
            let loaded = match stamp {
                None => LoadedRules::default(),
                Some(_) => match std::fs::read(&self.path) {
                    Ok(bytes) => LoadedRules::parse(&self.path, &bytes)?,
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                        LoadedRules::default()
                    }
                    Err(err) => {
                        return Err(RuleError::Read {
                            path: self.path.clone(),
                            message: err.to_string(),
                        });
                    }
                },
            };
            self.loaded = Some((stamp, loaded));
        }
        let (_, loaded) = self
            .loaded
            .get_or_insert_with(|| (stamp, LoadedRules::default()));
        Ok(loaded)
    }

    /// Appends a rule (an `allow_always` answer) to the file, creating it if needed. Says
    /// which version it extended and which it wrote, by the hashes of the very bytes read and
    /// written, so a caller can carry the first one's trust over to the second and to nothing
    /// else (a file swapped in between is a version nobody trusted).
    pub fn append(&mut self, rule: Rule) -> Result<Appended, RuleError> {
        let (before, mut file) = match std::fs::read(&self.path) {
            Ok(bytes) => {
                let text = std::str::from_utf8(&bytes).map_err(|e| RuleError::Read {
                    path: self.path.clone(),
                    message: e.to_string(),
                })?;
                let file: RulesFile = toml::from_str(text).map_err(|e| RuleError::Read {
                    path: self.path.clone(),
                    message: e.to_string(),
                })?;
                (Some(blake3::hash(&bytes).to_hex().to_string()), file)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => (None, RulesFile::default()),
            Err(err) => {
                return Err(RuleError::Read {
                    path: self.path.clone(),
                    message: err.to_string(),
                });
            }
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
        let written = format!("{header}{text}");
        std::fs::write(&self.path, &written).map_err(|e| write_err(e.to_string()))?;
        self.loaded = None;
        Ok(Appended {
            before,
            after: blake3::hash(written.as_bytes()).to_hex().to_string(),
        })
    }
}

/// What [`WorkspaceRules::append`] did: the version it extended (`None`: there was no file)
/// and the version it wrote (blake3 hashes, hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub before: Option<String>,
    pub after: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command_rules::{self, CommandFacts};

    fn rm_x() -> CommandFacts<'static> {
        static LINES: std::sync::LazyLock<Vec<crate::shell::CommandLine>> =
            std::sync::LazyLock::new(|| {
                crate::shell::classify("rm x", Path::new("/ws"), Path::new("/ws")).commands
            });
        CommandFacts {
            raw: "rm x",
            lines: &LINES,
            complete: true,
        }
    }

    fn rule(tool: &str, pattern: &str, decision: RuleDecision) -> Rule {
        Rule {
            tool: tool.into(),
            pattern: pattern.into(),
            host: None,
            sandbox: None,
            decision,
        }
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
        // A write rule covers edit too; `dir/**` matches the directory itself.
        assert_eq!(d("edit", "secrets/key.pem"), Some(RuleDecision::Deny));
        assert_eq!(d("write", "secrets"), Some(RuleDecision::Deny));
        assert_eq!(d("edit", "src/a.rs"), Some(RuleDecision::Allow));
        assert_eq!(d("read", "secrets/key.pem"), None);
        assert_eq!(d("write", "secretsx"), Some(RuleDecision::Allow));
    }

    #[test]
    fn denied_paths_for_search() {
        let set = RuleSet::new(&[
            rule("*", "secrets/**", RuleDecision::Deny),
            rule("read", "private/*.key", RuleDecision::Deny),
            rule("write", "out/**", RuleDecision::Deny),
        ])
        .unwrap();
        let tools = ["search", "read"];
        assert!(set.denies_path(&tools, "secrets/key.env"));
        assert!(set.denies_path(&tools, "secrets"));
        assert!(set.denies_path(&tools, "private/a.key"));
        assert!(!set.denies_path(&tools, "out/a"));
        assert!(!set.denies_path(&tools, "src/main.rs"));
    }

    #[test]
    fn an_invalid_glob_is_reported_with_its_rule() {
        let err = RuleSet::new(&[rule("write", "a[", RuleDecision::Deny)]).unwrap_err();
        assert!(err.to_string().contains("a["), "{err}");
    }

    #[test]
    fn workspace_rules_reload_when_the_file_changes_and_append_persists() {
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join(".amber/rules.toml");
        let mut rules = WorkspaceRules::new(ws.path());
        assert!(rules.current().unwrap().all().rules().next().is_none());
        assert_eq!(rules.current().unwrap().hash, None);
        rules
            .append(rule("bash", "rm", RuleDecision::Allow))
            .unwrap();
        let got =
            command_rules::decide(&[rules.current().unwrap().in_force(true)], "bash", &rm_x());
        assert_eq!(got.map(|(d, _)| d), Some(RuleDecision::Allow));
        // Untrusted, the allow rule does not count.
        let got =
            command_rules::decide(&[rules.current().unwrap().in_force(false)], "bash", &rm_x());
        assert_eq!(got, None);
        let hash = rules.current().unwrap().hash.clone().unwrap();
        assert_eq!(
            hash,
            blake3::hash(&std::fs::read(&file).unwrap())
                .to_hex()
                .to_string()
        );
        let got =
            command_rules::decide(&[rules.current().unwrap().in_force(true)], "bash", &rm_x());
        assert_eq!(got.map(|(d, _)| d), Some(RuleDecision::Allow));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains("[[rules]]") && text.contains("decision = \"allow\""),
            "{text}"
        );

        std::fs::write(
            &file,
            "[[rules]]\ntool='bash'\npattern='rm'\ndecision='deny'\n",
        )
        .unwrap();
        // Make sure the mtime differs even on coarse-grained filesystems.
        let later = SystemTime::now() + std::time::Duration::from_secs(2);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(later)
            .unwrap();
        // A deny rule counts trusted or not.
        for trusted in [true, false] {
            let got = command_rules::decide(
                &[rules.current().unwrap().in_force(trusted)],
                "bash",
                &rm_x(),
            );
            assert_eq!(got.map(|(d, _)| d), Some(RuleDecision::Deny));
        }
    }
}
