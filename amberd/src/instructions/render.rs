//! Reading instruction files and rendering them into the head of the prompt: one header
//! per file, the total capped with the nearest files kept first and every cut marked, a
//! one-line note for a file that was skipped.

use std::io::Read;
use std::path::Path;

use super::discover::Candidate;

/// One instruction file, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Loaded {
    Text {
        shown: String,
        text: String,
        /// Bytes of the file beyond `text` (it was read only up to the cap).
        unread: u64,
    },
    /// The file is there but cannot go into the prompt; `why` says what to fix.
    Skipped { shown: String, why: String },
}

/// Reads `candidate` (at most `limit` bytes). `None` when there is no such file or it is
/// empty. A file that cannot be read is `Skipped` with a warning in the log.
pub(crate) fn load(candidate: &Candidate, limit: usize) -> Option<Loaded> {
    let shown = candidate.shown.clone();
    let skipped = |why: String| {
        tracing::warn!(file = %candidate.path.display(), %why, "instruction file skipped");
        Some(Loaded::Skipped {
            shown: shown.clone(),
            why,
        })
    };
    let path = match &candidate.confine_to {
        Some(root) => match confined(root, &candidate.path) {
            Ok(path) => path,
            Err(why) => return skipped(why),
        },
        None => candidate.path.clone(),
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => return skipped(format!("cannot be read ({err})")),
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::new();
    let read_cap = u64::try_from(limit).unwrap_or(u64::MAX);
    if let Err(err) = file.take(read_cap).read_to_end(&mut bytes) {
        return skipped(format!("cannot be read ({err})"));
    }
    let truncated = (bytes.len() as u64) < len;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        // Read only up to the cap: a character split at the end is not an error.
        Err(err) if truncated && err.utf8_error().error_len().is_none() => {
            let valid = err.utf8_error().valid_up_to();
            let mut bytes = err.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(_) => return skipped("not valid UTF-8".to_owned()),
    };
    if text.trim().is_empty() {
        return None;
    }
    let unread = len.saturating_sub(text.len() as u64);
    Some(Loaded::Text {
        shown,
        text,
        unread,
    })
}

/// `path` through `read`'s confinement: its symlinks must resolve inside `root`.
fn confined(root: &Path, path: &Path) -> Result<std::path::PathBuf, String> {
    let Some(input) = path.to_str() else {
        return Err("its path is not valid UTF-8".to_owned());
    };
    amber_policy::confine(root, input).map_err(|err| match err {
        amber_policy::PathError::SymlinkEscape { target, .. } => format!(
            "not followed: a symlink to {}, outside the workspace",
            target.display()
        ),
        other => other.to_string(),
    })
}

/// How much of one file goes into the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Share {
    Whole,
    /// The first `n` bytes, then the cut marker.
    Head(usize),
    /// Left out entirely: nearer files took the whole budget.
    Omitted,
}

/// The instructions block, or `""` when there are no files. At most `max_bytes` of file
/// text goes in, nearest files first (`files` is in prompt order, nearest last).
pub(crate) fn render(files: &[Loaded], max_bytes: usize) -> String {
    if files.is_empty() {
        return String::new();
    }
    let mut shares = vec![Share::Omitted; files.len()];
    let mut remaining = max_bytes;
    for (share, file) in shares.iter_mut().zip(files).rev() {
        let Loaded::Text { text, unread, .. } = file else {
            continue;
        };
        if remaining == 0 {
            break;
        }
        if *unread == 0 && text.len() <= remaining {
            *share = Share::Whole;
            remaining -= text.len();
        } else {
            *share = Share::Head(text.floor_char_boundary(remaining.min(text.len())));
            remaining = 0;
        }
    }
    let mut out = String::from(
        "# Project instructions\n\nInstruction files of the user and the project, the most \
         general first; where they disagree, the later, more specific file wins.",
    );
    for (file, share) in files.iter().zip(shares) {
        match (file, share) {
            (Loaded::Skipped { shown, why }, _) => {
                out.push_str(&format!("\n\n[amber: `{shown}` was skipped: {why}]"));
            }
            (Loaded::Text { shown, .. }, Share::Omitted) => out.push_str(&format!(
                "\n\n[amber: `{shown}` was left out: instructions are capped at {max_bytes} \
                 bytes, nearer files first]"
            )),
            (
                Loaded::Text {
                    shown,
                    text,
                    unread,
                },
                share,
            ) => {
                out.push_str(&format!("\n\n## {shown}\n\n"));
                let kept = match share {
                    Share::Head(n) => n,
                    _ => text.len(),
                };
                out.push_str(text[..kept].trim_end());
                if kept < text.len() || *unread > 0 {
                    let cut = (text.len() - kept) as u64 + unread;
                    out.push_str(&format!(
                        "\n\n[amber: cut here: the remaining {cut} bytes of this file are left \
                         out (instructions are capped at {max_bytes} bytes)]"
                    ));
                }
            }
        }
    }
    out
}
