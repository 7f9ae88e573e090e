//! What `amber-cli run` sends: the prompt (its words, or stdin), the workspace root of a new
//! session, and the `--output-schema` file's JSON. Usage errors, before anything connects.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::UsageError;

/// The JSON of an `--output-schema` file (the daemon checks that it is a schema).
pub(crate) fn read_output_schema(path: &Path) -> Result<serde_json::Value, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError(format!(
            "--output-schema {}: cannot read it: {e}",
            path.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| {
        UsageError(format!(
            "--output-schema {}: not a JSON file: {e}",
            path.display()
        ))
    })
}

/// Whether the prompt comes from stdin (`-`, or no argument with piped stdin).
pub(crate) fn prompt_from_stdin(words: &[String]) -> bool {
    matches!(words, []) || matches!(words, [dash] if dash == "-")
}

/// The prompt from the arguments, or from stdin for `-` or no argument with piped stdin.
pub(crate) fn read_prompt(words: &[String]) -> Result<String, UsageError> {
    let from_stdin = match words {
        [] => {
            if std::io::stdin().is_terminal() {
                return Err(UsageError(
                    "no prompt given (pass PROMPT, or `-` to read stdin)".into(),
                ));
            }
            true
        }
        [dash] if dash == "-" => true,
        _ => false,
    };
    let prompt = if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| UsageError(format!("cannot read the prompt from stdin: {e}")))?;
        text
    } else {
        words.join(" ")
    };
    if prompt.trim().is_empty() {
        return Err(UsageError("the prompt is empty".into()));
    }
    Ok(prompt)
}

/// The workspace on a remote host (`--remote`): `--cwd` (absolute) or the current
/// directory's path, as it is — the daemon there resolves it.
pub(crate) fn remote_workspace(cwd: Option<&Path>) -> anyhow::Result<String> {
    let dir = match cwd {
        Some(dir) if dir.is_absolute() => dir.to_owned(),
        Some(dir) => {
            return Err(UsageError(format!(
                "with --remote, --cwd must be an absolute path on the remote host (got {})",
                dir.display()
            ))
            .into());
        }
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    dir.into_os_string().into_string().map_err(|p| {
        anyhow::anyhow!(
            "workspace path is not UTF-8: {}",
            PathBuf::from(p).display()
        )
    })
}

/// The absolute workspace root: `--cwd` or the current directory, symlinks resolved.
pub(crate) fn workspace(cwd: Option<&Path>) -> anyhow::Result<String> {
    let dir = match cwd {
        Some(dir) => dir.to_owned(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let abs: PathBuf =
        std::fs::canonicalize(&dir).with_context(|| format!("workspace {}", dir.display()))?;
    abs.into_os_string().into_string().map_err(|p| {
        anyhow::anyhow!(
            "workspace path is not UTF-8: {}",
            PathBuf::from(p).display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_words_are_joined() {
        let words = vec!["fix".to_owned(), "the".to_owned(), "bug".to_owned()];
        assert_eq!(read_prompt(&words).unwrap(), "fix the bug");
        assert!(read_prompt(&["  ".to_owned()]).is_err());
    }

    #[test]
    fn an_output_schema_file_must_be_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(&path, r#"{"type": "object"}"#).unwrap();
        assert_eq!(read_output_schema(&path).unwrap()["type"], "object");
        std::fs::write(&path, "{ nope").unwrap();
        assert!(
            read_output_schema(&path)
                .unwrap_err()
                .0
                .contains("not a JSON file")
        );
        let missing = read_output_schema(&dir.path().join("none.json")).unwrap_err();
        assert!(missing.0.contains("cannot read it"), "{}", missing.0);
    }

    #[test]
    fn workspace_is_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(Some(dir.path())).unwrap();
        assert!(Path::new(&ws).is_absolute());
        assert!(workspace(Some(&dir.path().join("missing"))).is_err());
    }
}
