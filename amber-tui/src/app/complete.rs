//! Completion popups of the input: `/` commands (from `command/list`) at the start of the
//! input, `@` workspace paths (walked by the client, gitignore-aware) anywhere.

use amber_proto::CommandInfo;

/// Entries shown at most.
pub(super) const MAX_ITEMS: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopupKind {
    Command,
    File,
}

/// An open completion popup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Popup {
    pub kind: PopupKind,
    /// (completion, description)
    pub items: Vec<(String, String)>,
    pub selected: usize,
    /// Byte offset in the input where the completed token starts (its `/` or `@`).
    pub start: usize,
}

impl Popup {
    pub fn up(&mut self) {
        self.selected = self
            .selected
            .checked_sub(1)
            .unwrap_or(self.items.len().saturating_sub(1));
    }

    pub fn down(&mut self) {
        self.selected = if self.selected + 1 >= self.items.len() {
            0
        } else {
            self.selected + 1
        };
    }

    /// The text that replaces the token.
    pub fn choice(&self) -> Option<String> {
        let (item, _) = self.items.get(self.selected)?;
        Some(match self.kind {
            PopupKind::Command => format!("/{item} "),
            PopupKind::File => format!("@{item} "),
        })
    }
}

/// The popup for `text` with the cursor at `cursor`, if any applies.
pub fn popup_for(
    text: &str,
    cursor: usize,
    commands: &[CommandInfo],
    files: &[String],
) -> Option<Popup> {
    let before = text.get(..cursor)?;
    let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let token = &before[start..];
    if start == 0
        && let Some(prefix) = token.strip_prefix('/')
    {
        let items: Vec<(String, String)> = commands
            .iter()
            .filter(|c| c.name.starts_with(prefix))
            .take(MAX_ITEMS)
            .map(|c| (c.name.clone(), c.description.clone()))
            .collect();
        return (!items.is_empty()).then_some(Popup {
            kind: PopupKind::Command,
            items,
            selected: 0,
            start,
        });
    }
    let query = token.strip_prefix('@')?;
    let items: Vec<(String, String)> = match_files(files, query)
        .into_iter()
        .map(|f| (f.to_owned(), String::new()))
        .collect();
    (!items.is_empty()).then_some(Popup {
        kind: PopupKind::File,
        items,
        selected: 0,
        start,
    })
}

/// Paths containing `query` (case-insensitive), best first: the file name starting with it,
/// then the path starting with it, then shorter paths.
pub fn match_files<'a>(files: &'a [String], query: &str) -> Vec<&'a str> {
    let q = query.to_lowercase();
    let mut hits: Vec<(u8, usize, &str)> = files
        .iter()
        .filter_map(|f| {
            let lower = f.to_lowercase();
            if !lower.contains(&q) {
                return None;
            }
            let name = lower.rsplit('/').next().unwrap_or(&lower);
            let rank = if name.starts_with(&q) {
                0
            } else if lower.starts_with(&q) {
                1
            } else {
                2
            };
            Some((rank, f.len(), f.as_str()))
        })
        .collect();
    hits.sort();
    hits.into_iter()
        .take(MAX_ITEMS)
        .map(|(_, _, f)| f)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmds() -> Vec<CommandInfo> {
        ["mode", "model", "detach"]
            .iter()
            .map(|n| CommandInfo {
                name: (*n).into(),
                description: format!("{n} cmd"),
            })
            .collect()
    }

    #[test]
    fn slash_at_the_start_completes_commands() {
        let p = popup_for("/mo", 3, &cmds(), &[]).unwrap();
        assert_eq!(p.kind, PopupKind::Command);
        assert_eq!(p.items.len(), 2);
        assert_eq!(p.choice().unwrap(), "/mode ");
        assert!(popup_for("x /mo", 5, &cmds(), &[]).is_none());
        assert!(popup_for("/mode read", 10, &cmds(), &[]).is_none());
    }

    #[test]
    fn at_completes_paths_best_first() {
        let files = vec![
            "src/lib.rs".to_owned(),
            "lib/x.rs".to_owned(),
            "docs/a-lib.md".to_owned(),
        ];
        let p = popup_for("see @lib", 8, &[], &files).unwrap();
        assert_eq!(p.start, 4);
        let names: Vec<&str> = p.items.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["src/lib.rs", "lib/x.rs", "docs/a-lib.md"]);
    }
}
