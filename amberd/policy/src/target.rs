//! What a tool call touches, as the engine sees it: a shell command (classified, its
//! writes resolved through the workspace's symlinks), a workspace path, a host (`fetch`),
//! or nothing; and
//! the approval scopes and `allow_always` rules that follow from it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::grants::Scope;
use super::patch_paths::patch_paths;
use super::paths::confine;
use super::protected::{is_protected, is_protected_in};
use super::rules::{Rule, RuleDecision};
use super::secrets::SecretLocations;
use super::shell::{CommandLine, Read, ReadPath, ShellClass, classify};

/// What the call touches.
pub(crate) enum Target {
    Command(CommandTarget),
    Path {
        relative: String,
        folder: String,
        /// `.amber/**`, `.git/hooks/**`, `.git/config` (see `protected`).
        protected: bool,
        /// Why the path is a secret location (`.env` …), if it is.
        secret: Option<String>,
    },
    /// The host a `fetch` URL names (lowercase, IPv6 without brackets).
    Host(String),
    /// The files a patch touches (`apply_patch`: every header's path), each judged like
    /// the path of `write`.
    Files(Vec<FileTarget>),
    Nothing,
}

/// One file of a [`Target::Files`], with the facts [`Target::Path`] has.
pub(crate) struct FileTarget {
    pub(crate) relative: String,
    pub(crate) folder: String,
    pub(crate) protected: bool,
    pub(crate) secret: Option<String>,
}

pub(crate) struct CommandTarget {
    pub(crate) command: String,
    pub(crate) class: ShellClass,
    pub(crate) reason: String,
    /// Writes outside the workspace, lexically or through a symlink.
    pub(crate) outside: bool,
    /// Writes a protected path, lexically or through a symlink.
    pub(crate) protected: bool,
    pub(crate) programs: Vec<String>,
    pub(crate) lines: Vec<CommandLine>,
    pub(crate) complete: bool,
    /// Some write target cannot be resolved: treated like an outside write.
    pub(crate) unresolved: bool,
    /// The workspace-relative paths it writes (lexically, and through symlinks), for the
    /// path rules of `write` and `edit`.
    pub(crate) written: Vec<String>,
    /// What it reads, resolved like the file tools' paths.
    pub(crate) reads: Vec<ReadCheck>,
}

/// One read of a command, judged.
pub(crate) struct ReadCheck {
    /// `cat: ../x`, for reasons.
    pub(crate) shown: String,
    /// What `read` path rules match: the workspace-relative path inside; outside, the
    /// resolved absolute path and its `~/…` form.
    pub(crate) subjects: Vec<String>,
    /// Outside the workspace (lexically or through a symlink), or not known at all.
    pub(crate) outside: bool,
    /// Why it is a secret location, if it is.
    pub(crate) secret: Option<String>,
}

/// Tools whose `command` argument is a shell command, and whose `path` is a file.
const COMMAND_TOOLS: &[&str] = &["bash", "process"];
const PATH_TOOLS: &[&str] = &["read", "write", "edit", "search"];
/// The tool whose `url` argument is fetched.
const URL_TOOL: &str = "fetch";
/// The tool whose `patch` argument names the files it touches in its headers.
const PATCH_TOOL: &str = "apply_patch";

pub(crate) fn target(
    tool: &str,
    args: &Value,
    workspace: &Path,
    secrets: &SecretLocations,
) -> Target {
    let text = |key: &str| args.get(key).and_then(Value::as_str);
    // Only the built-in tools' arguments mean what their names say; a plugin or MCP tool
    // with a `command` argument is not running a shell command we could classify.
    if let Some(command) = text("command").filter(|_| COMMAND_TOOLS.contains(&tool)) {
        return Target::Command(command_target(command, text("cwd"), workspace, secrets));
    }
    if let Some(path) = text("path").filter(|_| PATH_TOOLS.contains(&tool)) {
        let file = file_target(path, workspace, secrets);
        return Target::Path {
            relative: file.relative,
            folder: file.folder,
            protected: file.protected,
            secret: file.secret,
        };
    }
    // A URL that does not parse reaches nothing: the tool refuses it before any request.
    if let Some(host) = text("url")
        .filter(|_| tool == URL_TOOL)
        .and_then(|url| url_host(url).ok())
    {
        return Target::Host(host);
    }
    if let Some(patch) = text("patch").filter(|_| tool == PATCH_TOOL) {
        return Target::Files(
            patch_paths(patch)
                .into_iter()
                .map(|path| file_target(path, workspace, secrets))
                .collect(),
        );
    }
    Target::Nothing
}

/// Why a `fetch` URL names no host the policy can judge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("`{0}` is not a valid URL: {1}")]
    Invalid(String, String),
    #[error("`{0}`: only http and https URLs can be fetched")]
    Scheme(String),
    #[error("`{0}` names no host")]
    NoHost(String),
}

/// The host of an http(s) URL as rules and grants see it: lowercase (the URL parser's
/// form, IDNs as punycode), IPv6 without brackets, no trailing dot. `fetch` judges and
/// connects by the same parse.
pub fn url_host(url: &str) -> Result<String, UrlError> {
    let parsed =
        url::Url::parse(url).map_err(|e| UrlError::Invalid(url.to_owned(), e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(UrlError::Scheme(url.to_owned()));
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(domain)) => domain.trim_end_matches('.').to_owned(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(UrlError::NoHost(url.to_owned())),
    };
    if host.is_empty() {
        return Err(UrlError::NoHost(url.to_owned()));
    }
    Ok(host)
}

/// One file argument: workspace-relative (lexically, for rule globs and folder scopes),
/// whether it is protected, and whether it is a secret location.
fn file_target(path: &str, workspace: &Path, secrets: &SecretLocations) -> FileTarget {
    let relative = relative_path(workspace, path);
    let folder = Path::new(&relative)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".to_owned());
    let protected = is_protected(Path::new(&relative));
    let secret = confine(workspace, path).ok().and_then(|resolved| {
        secrets
            .secret(&resolved, false, workspace)
            .or_else(|| secrets.secret(&workspace.join(path), false, workspace))
    });
    FileTarget {
        relative,
        folder,
        protected,
        secret,
    }
}

fn command_target(
    command: &str,
    cwd: Option<&str>,
    workspace: &Path,
    secrets: &SecretLocations,
) -> CommandTarget {
    let cwd = cwd
        .and_then(|c| confine(workspace, c).ok())
        .unwrap_or_else(|| workspace.to_owned());
    let c = classify(command, workspace, &cwd);
    let mut target = CommandTarget {
        command: command.to_owned(),
        class: c.class,
        reason: c.reason,
        outside: c.outside_workspace,
        protected: c.protected,
        programs: c.scopes,
        lines: c.commands,
        complete: c.complete,
        unresolved: c.unresolved_write,
        written: Vec::new(),
        reads: c
            .reads
            .iter()
            .map(|read| read_check(read, workspace, secrets))
            .collect(),
    };
    // The classifier is lexical: resolve each write it found inside the workspace the way
    // the file tools do, so a symlink inside pointing outside (or at `.git/hooks`) counts.
    let root = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    for written in &c.writes {
        let shown = written.strip_prefix(workspace).unwrap_or(written).display();
        if let Ok(relative) = written.strip_prefix(workspace) {
            target.written.push(relative_text(relative));
        }
        let confined = confine(workspace, &written.to_string_lossy());
        if let Ok(resolved) = &confined
            && let Ok(relative) = resolved.strip_prefix(&root)
        {
            let relative = relative_text(relative);
            if !target.written.contains(&relative) {
                target.written.push(relative);
            }
        }
        match confined {
            Err(err) => {
                if !target.outside {
                    target.reason = format!("writes {shown}, which leaves the workspace: {err}");
                }
                target.outside = true;
            }
            Ok(resolved) if !target.protected && is_protected_in(&resolved, &root) => {
                target.protected = true;
                target.reason = format!(
                    "writes {shown}, which resolves to a protected path (amber rules, git hooks or config)"
                );
            }
            Ok(_) => {}
        }
    }
    target
}

/// Resolves one read the way the file tools resolve their paths.
fn read_check(read: &Read, workspace: &Path, secrets: &SecretLocations) -> ReadCheck {
    let unknown = || ReadCheck {
        shown: format!("{} (the path cannot be resolved)", read.shown),
        subjects: Vec::new(),
        outside: true,
        secret: None,
    };
    let lexical = match &read.path {
        ReadPath::Unknown => return unknown(),
        ReadPath::Home(relative) => match secrets.home() {
            Some(home) => home.join(relative),
            None => return unknown(),
        },
        ReadPath::Absolute(path) => path.clone(),
    };
    let secret = |path: &Path| secrets.secret(path, read.recursive, workspace);
    let root = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    if let Ok(resolved) = confine(workspace, &lexical.to_string_lossy()) {
        let relative = resolved
            .strip_prefix(&root)
            .map_or_else(|_| resolved.to_string_lossy().into_owned(), relative_text);
        return ReadCheck {
            shown: read.shown.clone(),
            subjects: vec![relative],
            outside: false,
            secret: secret(&resolved).or_else(|| secret(&lexical)),
        };
    }
    let resolved = lexical.canonicalize().unwrap_or_else(|_| lexical.clone());
    let mut subjects = vec![resolved.to_string_lossy().into_owned()];
    if let Some(home) = secrets.home()
        && let Ok(relative) = resolved.strip_prefix(home)
    {
        subjects.push(format!("~/{}", relative.display()));
    }
    ReadCheck {
        shown: read.shown.clone(),
        subjects,
        outside: true,
        secret: secret(&resolved).or_else(|| secret(&lexical)),
    }
}

fn relative_text(relative: &Path) -> String {
    let text = relative.to_string_lossy().into_owned();
    if text.is_empty() {
        ".".to_owned()
    } else {
        text
    }
}

/// The path relative to the workspace (lexically, for rule globs and folder scopes).
fn relative_path(workspace: &Path, path: &str) -> String {
    let absolute: PathBuf = match confine(workspace, path) {
        Ok(p) => p,
        Err(_) => return path.to_owned(),
    };
    // `confine` resolves symlinks; compare against the canonical root too.
    let root = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    absolute
        .strip_prefix(&root)
        .or_else(|_| absolute.strip_prefix(workspace))
        .map(|p| p.to_string_lossy().into_owned())
        .map(|p| if p.is_empty() { ".".to_owned() } else { p })
        .unwrap_or_else(|_| path.to_owned())
}

/// What an `allow_session` answer would grant. Outside, protected and unresolved writes:
/// nothing.
pub(crate) fn scopes(tool: &str, target: &Target) -> Vec<Scope> {
    match target {
        Target::Command(c) if c.outside || c.protected || c.unresolved => Vec::new(),
        Target::Command(c) => c
            .programs
            .iter()
            .map(|program| Scope::Program {
                tool: tool.to_owned(),
                program: program.clone(),
            })
            .collect(),
        Target::Path {
            protected: true, ..
        } => Vec::new(),
        Target::Path { folder, .. } => vec![Scope::Folder {
            tool: tool.to_owned(),
            folder: folder.clone(),
        }],
        Target::Host(host) => vec![Scope::Host {
            tool: tool.to_owned(),
            host: host.clone(),
        }],
        Target::Files(files) if files.iter().any(|f| f.protected) => Vec::new(),
        Target::Files(files) => {
            let mut scopes: Vec<Scope> = Vec::new();
            for file in files {
                let scope = Scope::Folder {
                    tool: tool.to_owned(),
                    folder: file.folder.clone(),
                };
                if !scopes.contains(&scope) {
                    scopes.push(scope);
                }
            }
            scopes
        }
        Target::Nothing => vec![Scope::Tool {
            tool: tool.to_owned(),
        }],
    }
}

/// The rules an `allow_always` answer persists for these scopes (an unsandboxed run: a
/// `sandbox = false` allow rule for its command).
pub fn rules_for(scopes: &[Scope]) -> Vec<Rule> {
    scopes
        .iter()
        .map(|scope| match scope {
            Scope::Program { tool, program } => Rule {
                tool: tool.clone(),
                pattern: program.clone(),
                host: None,
                sandbox: None,
                decision: RuleDecision::Allow,
            },
            Scope::Folder { tool, folder } => Rule {
                tool: tool.clone(),
                pattern: if folder == "." {
                    "**".to_owned()
                } else {
                    format!("{folder}/**")
                },
                host: None,
                sandbox: None,
                decision: RuleDecision::Allow,
            },
            Scope::Host { tool, host } => Rule {
                tool: tool.clone(),
                pattern: String::new(),
                host: Some(host.clone()),
                sandbox: None,
                decision: RuleDecision::Allow,
            },
            Scope::Tool { tool } => Rule {
                tool: tool.clone(),
                pattern: "*".to_owned(),
                host: None,
                sandbox: None,
                decision: RuleDecision::Allow,
            },
        })
        .collect()
}
