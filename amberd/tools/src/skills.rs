//! The `skills` tool and skill discovery. A skill is a folder holding a
//! `SKILL.md` that opens with a front matter block (`name`, `description`);
//! the body after it is the instructions. Skills come from the workspace's
//! `.amber/skills/*/`, the skills compaction saved for this workspace under
//! the data dir ([`workspace_skills_dir`], when the tool is given a data dir) and the user's `$XDG_CONFIG_HOME/amber/skills/*/` (else
//! `$HOME/.config/amber/skills/*/`); on a name clash workspace beats data dir
//! beats user. Discovery reads the filesystem on every call, so skills added
//! while the daemon runs are seen.

use std::io::Read;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::Args;
use super::{Tool, ToolContext, ToolOutcome};

/// The skills folder inside a workspace.
pub const WORKSPACE_SKILLS: &str = ".amber/skills";
/// The skill file inside a skill folder.
pub const SKILL_FILE: &str = "SKILL.md";
/// Bytes read from a skill file to find its name and description.
const HEAD_BYTES: u64 = 64 * 1024;
/// Bytes of a skill file `load` reads at most.
const LOAD_BYTES: u64 = 1024 * 1024;
/// Skill folders looked at per root.
const MAX_SKILLS_PER_ROOT: usize = 500;
/// Skills listed in the system prompt summary.
const SUMMARY_MAX: usize = 50;
/// Description length in the summary.
const SUMMARY_DESCRIPTION: usize = 200;

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillOrigin {
    Workspace,
    /// Saved by compaction under the data dir for this workspace.
    DataDir,
    User,
}

/// A discovered skill (its body is read on `load`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The `SKILL.md` file.
    pub path: PathBuf,
    pub origin: SkillOrigin,
}

/// Folder under the data dir holding the per-workspace skill folders.
const SKILLS_DIR: &str = "skills";

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Where compaction saves the skills it extracts for `workspace`:
/// `<data_dir>/skills/<16 hex digits>/`, FNV-1a of the canonical workspace path (the
/// path as given when it cannot be canonicalised), stable across runs and builds.
pub fn workspace_skills_dir(data_dir: &Path, workspace: &Path) -> PathBuf {
    let canonical = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let mut hash = FNV_OFFSET;
    for &byte in canonical.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    data_dir.join(SKILLS_DIR).join(format!("{hash:016x}"))
}

/// Skills of `workspace` and `user_dir`, by name; workspace skills shadow user ones.
pub fn discover(workspace: &Path, user_dir: Option<&Path>) -> Vec<Skill> {
    discover_all(workspace, None, user_dir)
}

/// Skills of `workspace`, `data_skills` (the workspace's folder under the data dir) and
/// `user_dir`, by name; earlier sources shadow later ones.
pub fn discover_all(
    workspace: &Path,
    data_skills: Option<&Path>,
    user_dir: Option<&Path>,
) -> Vec<Skill> {
    let mut skills = scan(&workspace.join(WORKSPACE_SKILLS), SkillOrigin::Workspace);
    // A workspace skill must not lead outside the workspace (symlinks).
    if let Ok(root) = std::fs::canonicalize(workspace) {
        skills.retain(|skill| {
            let inside = std::fs::canonicalize(&skill.path).is_ok_and(|p| p.starts_with(&root));
            if !inside {
                tracing::warn!(path = %skill.path.display(), "skills: ignoring a skill outside the workspace");
            }
            inside
        });
    }
    let others = [
        (data_skills, SkillOrigin::DataDir),
        (user_dir, SkillOrigin::User),
    ];
    for (dir, origin) in others {
        for skill in dir.map(|d| scan(d, origin)).unwrap_or_default() {
            if !skills.iter().any(|s| s.name == skill.name) {
                skills.push(skill);
            }
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

/// Skills of one root folder, first folder (by name) winning a name clash.
fn scan(root: &Path, origin: SkillOrigin) -> Vec<Skill> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    let mut skills: Vec<Skill> = Vec::new();
    for dir in dirs.into_iter().take(MAX_SKILLS_PER_ROOT) {
        let path = dir.join(SKILL_FILE);
        if !path.is_file() {
            continue;
        }
        let Ok(head) = read_prefix(&path, HEAD_BYTES) else {
            continue;
        };
        let folder = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let doc = parse(&head);
        let name = doc.name.unwrap_or(folder);
        if name.is_empty() || skills.iter().any(|s| s.name == name) {
            continue;
        }
        skills.push(Skill {
            name,
            description: doc.description.unwrap_or_default(),
            path,
            origin,
        });
    }
    skills
}

/// At most `limit` bytes of a file, as text (invalid UTF-8 replaced).
fn read_prefix(path: &Path, limit: u64) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit)
        .read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc<'a> {
    pub name: Option<String>,
    /// From the front matter, else the body's first non-empty line.
    pub description: Option<String>,
    /// Everything after the front matter.
    pub body: &'a str,
}

/// Split a `SKILL.md` into front matter fields and body. The front matter is
/// a leading `---` … `---` block of `key: value` lines (values may be quoted;
/// indented lines continue the previous value).
pub fn parse(text: &str) -> SkillDoc<'_> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (fields, body) = split_front_matter(text).unwrap_or((Vec::new(), text));
    let mut name = None;
    let mut description = None;
    for (key, value) in fields {
        match key.as_str() {
            "name" if !value.is_empty() => name = Some(value),
            "description" if !value.is_empty() => description = Some(value),
            _ => {}
        }
    }
    let body = body.trim_start_matches(['\n', '\r']);
    let description = description.or_else(|| {
        body.lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .map(str::to_owned)
    });
    SkillDoc {
        name,
        description,
        body,
    }
}

/// The front matter's `(key, value)` pairs and the rest, if `text` opens with one.
fn split_front_matter(text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut lines = text.split_inclusive('\n');
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut offset = text.find('\n')? + 1;
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in lines {
        offset += line.len();
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            let fields = fields
                .into_iter()
                .map(|(k, v)| (k, unquote(v.trim())))
                .collect();
            return Some((fields, &text[offset..]));
        }
        if trimmed.trim_start().is_empty() || trimmed.trim_start().starts_with('#') {
            continue;
        }
        let continuation = trimmed.starts_with([' ', '\t']);
        match (continuation, fields.last_mut()) {
            (true, Some((_, value))) => {
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(trimmed.trim());
            }
            _ => {
                if let Some((key, value)) = trimmed.split_once(':') {
                    let value = value.trim();
                    // YAML block scalars (`>`, `|-`): the text follows on indented lines.
                    let value = if matches!(value, ">" | ">-" | "|" | "|-") {
                        ""
                    } else {
                        value
                    };
                    fields.push((key.trim().to_ascii_lowercase(), value.to_owned()));
                }
            }
        }
    }
    None
}

/// Strip matching quotes; `\"` and `\\` are unescaped inside double quotes.
fn unquote(value: &str) -> String {
    let bytes = value.as_bytes();
    if value.len() >= 2 && bytes[0] == bytes[value.len() - 1] {
        let inner = &value[1..value.len() - 1];
        if bytes[0] == b'\'' {
            return inner.replace("''", "'");
        }
        if bytes[0] == b'"' {
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match (c, chars.clone().next()) {
                    ('\\', Some(next @ ('"' | '\\'))) => {
                        out.push(next);
                        chars.next();
                    }
                    ('\\', Some('n')) => {
                        out.push('\n');
                        chars.next();
                    }
                    _ => out.push(c),
                }
            }
            return out;
        }
    }
    value.to_owned()
}

/// A block for the system prompt listing the skills of `workspace` and `user_dir` (the
/// user's skills folder), or None when there are none.
pub fn summary_with(workspace: &Path, user_dir: Option<&Path>) -> Option<String> {
    summary_all(workspace, None, user_dir)
}

/// [`summary_with`] including the skills compaction saved for `workspace` under `data_dir`.
pub fn summary_with_data_dir(
    workspace: &Path,
    data_dir: &Path,
    user_dir: Option<&Path>,
) -> Option<String> {
    let data_skills = workspace_skills_dir(data_dir, workspace);
    summary_all(workspace, Some(&data_skills), user_dir)
}

fn summary_all(
    workspace: &Path,
    data_skills: Option<&Path>,
    user_dir: Option<&Path>,
) -> Option<String> {
    let skills = discover_all(workspace, data_skills, user_dir);
    if skills.is_empty() {
        return None;
    }
    let mut out = "Skills available (load with the skills tool):".to_owned();
    for skill in skills.iter().take(SUMMARY_MAX) {
        let mut description = skill.description.replace('\n', " ");
        if description.len() > SUMMARY_DESCRIPTION {
            let cut = description.floor_char_boundary(SUMMARY_DESCRIPTION);
            description.truncate(cut);
            description.push('…');
        }
        out.push_str(&format!("\n- {}: {description}", skill.name));
    }
    if skills.len() > SUMMARY_MAX {
        out.push_str(&format!(
            "\n… and {} more (action `list` shows all)",
            skills.len() - SUMMARY_MAX
        ));
    }
    Some(out)
}

pub struct SkillsTool {
    /// The user's skills folder (the daemon names it: `$XDG_CONFIG_HOME/amber/skills`).
    user_dir: Option<PathBuf>,
    /// The daemon's data dir: compaction's skills for the workspace live under it.
    data_dir: Option<PathBuf>,
}

impl SkillsTool {
    /// Skills of the workspace and of `user_dir` (None: workspace skills only).
    pub fn with_user_dir(user_dir: Option<PathBuf>) -> Self {
        Self {
            user_dir,
            data_dir: None,
        }
    }

    /// Also offer the skills compaction saved under `data_dir` for the call's workspace.
    pub fn with_data_dir(mut self, data_dir: PathBuf) -> Self {
        self.data_dir = Some(data_dir);
        self
    }

    fn user_dir(&self) -> Option<PathBuf> {
        self.user_dir.clone()
    }
}

impl Tool for SkillsTool {
    fn name(&self) -> &str {
        "skills"
    }

    fn description(&self) -> &str {
        "Skills are packaged instructions for specific tasks. `list` shows the available \
         skills with their descriptions; `load` with `name` returns a skill's instructions. \
         Load a skill when its description matches the task, then follow it."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "load"], "description": "What to do"},
                "name": {"type": "string", "description": "load: the skill's name"}
            },
            "required": ["action"]
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let parsed = Args::new("skills", &args).and_then(|a| {
                Ok((
                    a.string("action")?.to_owned(),
                    a.opt_string("name")?.map(str::to_owned),
                ))
            });
            let (action, name) = match parsed {
                Ok(parsed) => parsed,
                Err(err) => return err.into(),
            };
            // A workspace elsewhere: its skills are read from amberd's mirror of it.
            let workspace = ctx
                .session
                .config_root()
                .map_or_else(|| ctx.workspace.clone(), std::path::Path::to_path_buf);
            let user_dir = self.user_dir();
            let data_skills = self
                .data_dir
                .as_deref()
                .map(|d| workspace_skills_dir(d, &workspace));
            let job = move || {
                let dirs = [data_skills.as_deref(), user_dir.as_deref()];
                run(&action, name.as_deref(), &workspace, dirs)
            };
            match tokio::task::spawn_blocking(job).await {
                Ok(outcome) => outcome,
                Err(err) => ToolOutcome::error(format!("skills: {err}")),
            }
        })
    }
}

/// `dirs`: the data-dir skills folder and the user skills folder.
fn run(
    action: &str,
    name: Option<&str>,
    workspace: &Path,
    dirs: [Option<&Path>; 2],
) -> ToolOutcome {
    let skills = discover_all(workspace, dirs[0], dirs[1]);
    match action {
        "list" => ToolOutcome::ok(render_list(&skills, workspace, dirs)),
        "load" => match name.map(str::trim) {
            None | Some("") => ToolOutcome::error(
                "invalid arguments for `skills`: `load` needs `name` (one of the skills `list` shows)",
            ),
            Some(name) => load(&skills, name, workspace),
        },
        other => ToolOutcome::error(format!(
            "invalid arguments for `skills`: `action` must be `list` or `load`, got `{other}`"
        )),
    }
}

fn render_list(skills: &[Skill], workspace: &Path, dirs: [Option<&Path>; 2]) -> String {
    if skills.is_empty() {
        let mut looked = vec![workspace.join(WORKSPACE_SKILLS).display().to_string()];
        looked.extend(dirs.iter().flatten().map(|d| d.display().to_string()));
        return format!(
            "no skills found (looked for */{SKILL_FILE} in {})",
            looked.join(" and ")
        );
    }
    skills
        .iter()
        .map(|s| format!("- {}: {}", s.name, s.description.replace('\n', " ")))
        .collect::<Vec<_>>()
        .join("\n")
}

fn load(skills: &[Skill], name: &str, workspace: &Path) -> ToolOutcome {
    let found = skills.iter().find(|s| s.name == name).or_else(|| {
        let mut folded = skills.iter().filter(|s| s.name.eq_ignore_ascii_case(name));
        match (folded.next(), folded.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    });
    let Some(skill) = found else {
        let available: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return ToolOutcome::error(if available.is_empty() {
            format!("no skill named `{name}`: there are no skills")
        } else {
            format!(
                "no skill named `{name}`; available: {}",
                available.join(", ")
            )
        });
    };
    let text = match read_prefix(&skill.path, LOAD_BYTES) {
        Ok(text) => text,
        Err(err) => {
            return ToolOutcome::error(format!(
                "cannot read skill `{}` ({}): {err}",
                skill.name,
                skill.path.display()
            ));
        }
    };
    let doc = parse(&text);
    let shown = skill.path.strip_prefix(workspace).unwrap_or(&skill.path);
    let folder = shown.parent().unwrap_or(shown);
    ToolOutcome::ok(format!(
        "Skill `{}` ({}; paths it mentions are relative to {}/):\n\n{}",
        skill.name,
        shown.display(),
        folder.display(),
        doc.body.trim_end()
    ))
}
