//! How extracted skills are written: one folder per skill holding a `SKILL.md` (front
//! matter `name` and `description`, then the body), in the workspace's folder under the
//! data dir (`tools::skills::workspace_skills_dir`), which the `skills` tool reads. Names
//! are sanitised to one safe path component.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::ExtractedSkill;
use amber_tools::skills::SKILL_FILE;

/// Longest sanitised skill name.
const MAX_NAME: usize = 64;

/// A skill name as one safe folder name: ASCII letters, digits, `-`, `_` and `.` (others
/// become `-`), lowercase, no leading or trailing `.`/`-`, at most 64 bytes; `skill` when
/// nothing is left.
pub(super) fn sanitize_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() || matches!(c, '_' | '.') {
            c
        } else {
            '-'
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out.truncate(MAX_NAME);
    let out = out.trim_matches(['.', '-']);
    if out.is_empty() {
        "skill".to_owned()
    } else {
        out.to_owned()
    }
}

/// Writes each skill to `<skills_dir>/<sanitised name>/SKILL.md`, replacing a skill of the
/// same name from an earlier compaction; two skills of one batch that sanitise alike get
/// `-2`, `-3`, … Returns the files written. A skill folder that is a symlink is refused.
pub(crate) fn save_skills(
    skills_dir: &Path,
    skills: &[ExtractedSkill],
) -> Result<Vec<PathBuf>, std::io::Error> {
    std::fs::create_dir_all(skills_dir)?;
    let mut used: Vec<String> = Vec::new();
    let mut written = Vec::new();
    for skill in skills {
        let base = sanitize_name(&skill.name);
        let mut name = base.clone();
        let mut n = 1;
        while used.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        used.push(name.clone());
        let dir = skills_dir.join(&name);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("skill folder {} is a symlink", dir.display()),
            ));
        }
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(SKILL_FILE);
        write_atomic(&path, &render(&name, skill))?;
        written.push(path);
    }
    Ok(written)
}

/// The `SKILL.md` text: front matter, a blank line, the body.
fn render(name: &str, skill: &ExtractedSkill) -> String {
    let description = skill.description.split_whitespace().collect::<Vec<_>>();
    let description = description.join(" ");
    let quoted = description.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "---\nname: {name}\ndescription: \"{quoted}\"\n---\n\n{}\n",
        skill.body.trim_end()
    )
}

/// Writes `text` to a temporary file next to `path`, then renames it over `path`.
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_tools::skills;

    fn skill(name: &str, description: &str, body: &str) -> ExtractedSkill {
        ExtractedSkill {
            name: name.into(),
            description: description.into(),
            body: body.into(),
        }
    }

    #[test]
    fn names_are_one_safe_component() {
        for (raw, want) in [
            ("../x", "x"),
            ("../../etc/passwd", "etc-passwd"),
            ("..", "skill"),
            ("/abs/path", "abs-path"),
            ("Run the Tests!", "run-the-tests"),
            ("a\\b\0c", "a-b-c"),
            ("  .hidden", "hidden"),
            ("ünïcode", "n-code"),
            ("", "skill"),
        ] {
            assert_eq!(sanitize_name(raw), want, "{raw:?}");
        }
        assert_eq!(sanitize_name(&"a".repeat(200)).len(), MAX_NAME);
    }

    #[test]
    fn saved_skills_stay_inside_and_parse_back() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("skills").join("ws");
        let written = save_skills(
            &dir,
            &[
                skill(
                    "../x",
                    "Escape: \"attempt\"\nline two",
                    "# Steps\n1. do it\n",
                ),
                skill("x", "second x", "body"),
            ],
        )
        .unwrap();
        assert_eq!(
            written,
            vec![dir.join("x/SKILL.md"), dir.join("x-2/SKILL.md")]
        );
        assert!(!root.path().join("skills/x").exists());
        let text = std::fs::read_to_string(&written[0]).unwrap();
        let doc = skills::parse(&text);
        assert_eq!(doc.name.as_deref(), Some("x"));
        assert_eq!(
            doc.description.as_deref(),
            Some("Escape: \"attempt\" line two")
        );
        assert_eq!(doc.body, "# Steps\n1. do it\n");
        // Saving again replaces the skill.
        save_skills(&dir, &[skill("x", "new", "new body")]).unwrap();
        let doc_text = std::fs::read_to_string(dir.join("x/SKILL.md")).unwrap();
        assert_eq!(skills::parse(&doc_text).body, "new body\n");
    }

    #[test]
    fn symlinked_skill_folders_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dir = root.path().join("ws");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("evil")).unwrap();
        assert!(save_skills(&dir, &[skill("evil", "d", "b")]).is_err());
        assert!(!outside.path().join(SKILL_FILE).exists());
    }
}
