//! Session names (`session/new {name}`, `session/rename`): the rules a name follows and the
//! index that keeps names unique and finds a session by its name.
//!
//! **Invariants:** a valid name can never be read as a session id or an id's prefix (ids are
//! hex digits and dashes; a name has some other character), so looking a `sessionId` up as
//! a name never shadows an id. The index maps each name to exactly one session; the
//! manager changes it only under its registry lock, together with the session's info.

use std::collections::HashMap;

/// The longest name, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 64;

/// Why a name is refused (the message follows `name: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    #[error("`{name}` is longer than {MAX_NAME_CHARS} characters ({chars})")]
    TooLong { name: String, chars: usize },
    #[error("`{0}` contains whitespace")]
    Whitespace(String),
    #[error("{0:?} contains a control character")]
    Control(String),
    #[error("`{0}` starts with `-`, which reads as a command-line option")]
    LeadingDash(String),
    #[error(
        "`{0}` has only hex digits and `-`, so it could be read as a session id; add a letter \
         other than a-f (or another character)"
    )]
    LooksLikeId(String),
    #[error("`{name}` is taken by session {holder}")]
    Taken { name: String, holder: String },
}

/// A requested name as the session will have it: `None` (or empty) means unnamed.
pub(crate) fn requested(name: Option<String>) -> Option<String> {
    name.filter(|n| !n.is_empty())
}

/// Checks `name` against the rules: 1 to [`MAX_NAME_CHARS`] characters, no whitespace or
/// control character, no leading `-`, and at least one character that is neither a hex
/// digit nor `-`. (An empty name means "unnamed" and is handled by [`requested`].)
pub(crate) fn check(name: &str) -> Result<(), NameError> {
    // Control first: a name with a newline must not be echoed raw in the message.
    if name.chars().any(char::is_control) {
        return Err(NameError::Control(name.to_owned()));
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(NameError::TooLong {
            name: name.chars().take(MAX_NAME_CHARS).collect::<String>() + "…",
            chars,
        });
    }
    if name.chars().any(char::is_whitespace) {
        return Err(NameError::Whitespace(name.to_owned()));
    }
    if name.starts_with('-') {
        return Err(NameError::LeadingDash(name.to_owned()));
    }
    if name.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(NameError::LooksLikeId(name.to_owned()));
    }
    Ok(())
}

/// How a session is named in an error: the first eight characters of its id, as
/// `amber-cli sessions` shows it.
pub(crate) fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// Which session has which name.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    /// Name → session id.
    holders: HashMap<String, String>,
}

impl NameIndex {
    /// The id of the session named `name`, if any.
    pub(crate) fn holder(&self, name: &str) -> Option<&str> {
        self.holders.get(name).map(String::as_str)
    }

    /// Gives `name` to session `id`. Refused when another session has it; a session's own
    /// name is given again without change.
    pub(crate) fn claim(&mut self, name: &str, id: &str) -> Result<(), NameError> {
        match self.holders.get(name) {
            Some(holder) if holder != id => Err(NameError::Taken {
                name: name.to_owned(),
                holder: short_id(holder),
            }),
            Some(_) => Ok(()),
            None => {
                self.holders.insert(name.to_owned(), id.to_owned());
                Ok(())
            }
        }
    }

    /// Takes `name` from session `id` (another session's name stays).
    pub(crate) fn release(&mut self, name: &str, id: &str) {
        if self.holder(name) == Some(id) {
            self.holders.remove(name);
        }
    }

    /// Takes whatever name session `id` has (it is being deleted).
    pub(crate) fn release_session(&mut self, id: &str) {
        self.holders.retain(|_, holder| holder != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        let long = "z".repeat(MAX_NAME_CHARS);
        let too_long = "z".repeat(MAX_NAME_CHARS + 1);
        let table: &[(&str, Result<(), &str>)] = &[
            ("fix-auth", Ok(())),
            ("v2", Ok(())),
            ("x", Ok(())),
            ("g", Ok(())),
            ("größe", Ok(())),
            ("feat/login_ui.v2", Ok(())),
            ("a-", Err("hex digits")),
            ("3f2a9c1d", Err("hex digits")),
            ("cafe", Err("hex digits")),
            ("CAFE-00", Err("hex digits")),
            ("3f2a9c1d-0000-4000-8000-000000000001", Err("hex digits")),
            ("-", Err("starts with `-`")),
            ("-fix", Err("starts with `-`")),
            ("my task", Err("whitespace")),
            ("tab\there", Err("control character")),
            ("line\nbreak", Err("control character")),
            ("nbsp\u{a0}x", Err("whitespace")),
            ("bell\u{7}x", Err("control character")),
            (&long, Ok(())),
            (&too_long, Err("longer than 64 characters (65)")),
        ];
        for (name, expected) in table {
            match (check(name), expected) {
                (Ok(()), Ok(())) => {}
                (Err(err), Err(part)) => {
                    let message = err.to_string();
                    assert!(message.contains(part), "{name:?}: {message}");
                }
                (got, want) => panic!("{name:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_64_character_name_counts_characters_not_bytes() {
        assert_eq!(check(&"ä".repeat(MAX_NAME_CHARS)), Ok(()));
    }

    #[test]
    fn an_empty_name_means_unnamed() {
        assert_eq!(requested(Some(String::new())), None);
        assert_eq!(requested(None), None);
        assert_eq!(requested(Some("x".into())), Some("x".into()));
    }

    #[test]
    fn a_name_belongs_to_one_session() {
        let mut index = NameIndex::default();
        let first = "3f2a9c1d-0000-4000-8000-000000000001";
        let second = "77b0e4aa-1111-4111-8111-111111111111";
        index.claim("fix-auth", first).unwrap();
        // Its own name again: no change.
        index.claim("fix-auth", first).unwrap();
        let err = index.claim("fix-auth", second).unwrap_err();
        assert_eq!(err.to_string(), "`fix-auth` is taken by session 3f2a9c1d");
        assert_eq!(index.holder("fix-auth"), Some(first));
        // Another session's name is not released by mistake.
        index.release("fix-auth", second);
        assert_eq!(index.holder("fix-auth"), Some(first));
        index.release("fix-auth", first);
        assert_eq!(index.holder("fix-auth"), None);
        index.claim("fix-auth", second).unwrap();
        index.release_session(second);
        assert_eq!(index.holder("fix-auth"), None);
    }
}
