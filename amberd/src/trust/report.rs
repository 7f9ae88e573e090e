//! What a workspace's configuration would do, and where its trust stands: `trust/list`,
//! `trust/respond` and `amber-cli doctor` read it from here.

use std::path::Path;

use amber_proto::{TrustDecision, TrustFile, TrustKind, TrustState};

use super::files::{ConfigKind, TrustFileError, WorkspaceFile};
use super::store::{Stored, TrustStore};

/// Why `trust/respond` refused.
#[derive(Debug, thiserror::Error)]
pub enum RespondError {
    #[error(
        "{0} is not a workspace configuration file (one of .amber/rules.toml, .amber/hooks.toml, .amber/agents/NAME.md)"
    )]
    NotConfiguration(String),
    #[error("{0} does not exist")]
    Missing(String),
    #[error(
        "{path} changed since it was listed (its hash is now {now}): list it again and review the new version"
    )]
    Changed { path: String, now: String },
    #[error("{0}")]
    Unusable(String),
    #[error("cannot remember the decision: {0}")]
    Store(#[from] std::io::Error),
}

/// Every configuration file of `workspace`, as `trust/list` shows it.
pub fn list(workspace: &Path, store: &TrustStore) -> Vec<TrustFile> {
    super::discover(workspace)
        .into_iter()
        .map(|found| match found {
            Ok(file) => describe(workspace, &file, store),
            Err(err) => unreadable(&err),
        })
        .collect()
}

/// Trusts or denies the version `hash` of `relative` (workspace-relative).
pub fn respond(
    workspace: &Path,
    store: &TrustStore,
    relative: &str,
    hash: &str,
    decision: TrustDecision,
) -> Result<TrustFile, RespondError> {
    let relative = relative.trim_start_matches("./");
    let kind =
        kind_of(relative).ok_or_else(|| RespondError::NotConfiguration(relative.to_owned()))?;
    let file = super::read(workspace, kind, relative)
        .map_err(|e| RespondError::Unusable(e.to_string()))?
        .ok_or_else(|| RespondError::Missing(relative.to_owned()))?;
    if file.hash != hash {
        return Err(RespondError::Changed {
            path: relative.to_owned(),
            now: file.hash,
        });
    }
    let shown = describe(workspace, &file, store);
    match (decision, shown.state) {
        (TrustDecision::Trust, TrustState::Invalid | TrustState::Refused) => {
            return Err(RespondError::Unusable(
                shown
                    .error
                    .unwrap_or_else(|| format!("{relative} cannot be used")),
            ));
        }
        (TrustDecision::Trust, _) => store.remember(&file.path, &file.hash)?,
        (TrustDecision::Deny, _) => store.deny(&file.path, &file.hash)?,
    }
    Ok(describe(workspace, &file, store))
}

/// The kind of a workspace-relative configuration path.
fn kind_of(relative: &str) -> Option<ConfigKind> {
    match relative {
        super::files::RULES => Some(ConfigKind::Rules),
        super::files::HOOKS => Some(ConfigKind::Hooks),
        _ => relative
            .strip_prefix(super::files::AGENTS)
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|name| name.ends_with(".md") && !name.contains('/'))
            .map(|_| ConfigKind::Agent),
    }
}

fn proto_kind(kind: ConfigKind) -> TrustKind {
    match kind {
        ConfigKind::Rules => TrustKind::Rules,
        ConfigKind::Hooks => TrustKind::Hooks,
        ConfigKind::Agent => TrustKind::Agent,
    }
}

fn unreadable(err: &TrustFileError) -> TrustFile {
    let (path, kind) = match err {
        TrustFileError::Outside { relative, .. }
        | TrustFileError::NotAFile { relative }
        | TrustFileError::TooLarge { relative, .. }
        | TrustFileError::Read { relative, .. } => (
            relative.clone(),
            kind_of(relative).unwrap_or(ConfigKind::Agent),
        ),
    };
    TrustFile {
        path,
        kind: proto_kind(kind),
        hash: None,
        state: TrustState::Invalid,
        effects: Vec::new(),
        error: Some(err.to_string()),
    }
}

/// One file: what it does (untrusted and trusted) and where its trust stands.
fn describe(workspace: &Path, file: &WorkspaceFile, store: &TrustStore) -> TrustFile {
    let stored = store.stored(&file.path, &file.hash);
    let decided = match stored {
        Stored::Trusted => TrustState::Trusted,
        Stored::Denied => TrustState::Denied,
        Stored::Undecided => TrustState::Untrusted,
    };
    let mut shown = TrustFile {
        path: file.relative.clone(),
        kind: proto_kind(file.kind),
        hash: Some(file.hash.clone()),
        state: decided,
        effects: Vec::new(),
        error: None,
    };
    let outcome = match file.kind {
        ConfigKind::Rules => rules_effects(file),
        ConfigKind::Hooks => hooks_effects(file),
        ConfigKind::Agent => agent_effects(workspace, file),
    };
    match outcome {
        Ok((effects, needs_trust)) => {
            shown.effects = effects;
            if !needs_trust && decided != TrustState::Denied {
                shown.state = TrustState::Inert;
            }
        }
        Err((state, error)) => {
            shown.state = state;
            shown.error = Some(error);
        }
    }
    shown
}

type Effects = Result<(Vec<String>, bool), (TrustState, String)>;

fn rules_effects(file: &WorkspaceFile) -> Effects {
    let bytes = file
        .utf8()
        .ok_or_else(|| (TrustState::Invalid, "not valid UTF-8".to_owned()))?;
    let loaded = amber_policy::LoadedRules::parse(&file.path, bytes.as_bytes())
        .map_err(|e| (TrustState::Invalid, e.to_string()))?;
    let effects = loaded
        .all()
        .rules()
        .map(|rule| {
            let when = match rule.decision {
                amber_policy::RuleDecision::Allow => "once trusted",
                amber_policy::RuleDecision::Ask | amber_policy::RuleDecision::Deny => "always",
            };
            format!(
                "{} rule `{}` ({when})",
                match rule.decision {
                    amber_policy::RuleDecision::Allow => "allow",
                    amber_policy::RuleDecision::Ask => "ask",
                    amber_policy::RuleDecision::Deny => "deny",
                },
                rule.shown()
            )
        })
        .collect();
    Ok((effects, loaded.all().allows_anything()))
}

fn hooks_effects(file: &WorkspaceFile) -> Effects {
    let parsed =
        crate::hooks::HooksFile::parse(&file.text()).map_err(|e| (TrustState::Invalid, e))?;
    let effects: Vec<String> = parsed
        .hooks
        .iter()
        .map(|h| {
            let on = h
                .matcher
                .as_deref()
                .map(|m| format!(" on {m}"))
                .unwrap_or_default();
            format!(
                "{}{on}: runs `{}` (once trusted)",
                h.event.as_str(),
                h.command.join(" ")
            )
        })
        .collect();
    let needs_trust = !effects.is_empty();
    Ok((effects, needs_trust))
}

fn agent_effects(workspace: &Path, file: &WorkspaceFile) -> Effects {
    let name = Path::new(&file.relative)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let agent = crate::agents::find(&crate::agents::AgentDirs::new(Some(workspace)), &name)
        .map_err(|e| match e {
            crate::agents::AgentError::ShadowsBundled { .. } => {
                (TrustState::Refused, e.to_string())
            }
            _ => (TrustState::Invalid, e.to_string()),
        })?;
    let d = &agent.definition;
    let mut effect = format!("agent `{}` (once trusted): {}", agent.name, d.description);
    if let Some(mode) = d.mode {
        effect.push_str(&format!("; mode {}", mode.as_str()));
    }
    if let Some(tools) = &d.tools {
        effect.push_str(&format!("; tools {}", tools.join(", ")));
    }
    if let Some(model) = &d.model {
        effect.push_str(&format!("; model {model}"));
    }
    Ok((vec![effect], true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, std::path::PathBuf, TrustStore) {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join(".amber/agents")).unwrap();
        let store = TrustStore::new(&root.path().join("data"));
        (root, ws, store)
    }

    fn state(files: &[TrustFile], path: &str) -> TrustState {
        files.iter().find(|f| f.path == path).unwrap().state
    }

    #[test]
    fn configuration_paths_and_nothing_else() {
        for (path, kind) in [
            (".amber/rules.toml", Some(ConfigKind::Rules)),
            (".amber/hooks.toml", Some(ConfigKind::Hooks)),
            (".amber/agents/a.md", Some(ConfigKind::Agent)),
            (".amber/agents/sub/a.md", None),
            (".amber/agents/a.txt", None),
            (".amber/skills/x/SKILL.md", None),
            ("Makefile", None),
            ("../.amber/rules.toml", None),
        ] {
            assert_eq!(kind_of(path), kind, "{path}");
        }
    }

    #[test]
    fn states_follow_the_content_and_the_decisions() {
        let (_root, ws, store) = workspace();
        let rules = ".amber/rules.toml";
        std::fs::write(
            ws.join(rules),
            "[[rules]]\ntool = \"write\"\npattern = \"x/**\"\ndecision = \"deny\"\n",
        )
        .unwrap();
        std::fs::write(
            ws.join(".amber/hooks.toml"),
            "[[hooks]]\nevent = \"nope\"\n",
        )
        .unwrap();
        std::fs::write(
            ws.join(".amber/agents/review.md"),
            "---\ndescription: d\n---\nbody\n",
        )
        .unwrap();
        let files = list(&ws, &store);
        assert_eq!(state(&files, rules), TrustState::Inert, "deny rules only");
        assert_eq!(state(&files, ".amber/hooks.toml"), TrustState::Invalid);
        assert_eq!(
            state(&files, ".amber/agents/review.md"),
            TrustState::Refused
        );

        std::fs::write(
            ws.join(rules),
            "[[rules]]\ntool = \"bash\"\npattern = \"make\"\nsandbox = false\ndecision = \"allow\"\n",
        )
        .unwrap();
        let files = list(&ws, &store);
        assert_eq!(state(&files, rules), TrustState::Untrusted);
        let hash = files[0].hash.clone().unwrap();
        let err = respond(&ws, &store, rules, "stale", TrustDecision::Trust).unwrap_err();
        assert!(matches!(err, RespondError::Changed { .. }), "{err}");
        let trusted = respond(&ws, &store, rules, &hash, TrustDecision::Trust).unwrap();
        assert_eq!(trusted.state, TrustState::Trusted);
        assert!(store.is_trusted(&ws.join(rules), &hash));
        let denied = respond(&ws, &store, rules, &hash, TrustDecision::Deny).unwrap();
        assert_eq!(denied.state, TrustState::Denied);
        // An invalid or refused file cannot be trusted; a path that is none cannot be decided.
        let hooks_hash = list(&ws, &store)[1].hash.clone().unwrap();
        assert!(
            respond(
                &ws,
                &store,
                ".amber/hooks.toml",
                &hooks_hash,
                TrustDecision::Trust
            )
            .is_err()
        );
        assert!(matches!(
            respond(&ws, &store, "Makefile", "h", TrustDecision::Trust),
            Err(RespondError::NotConfiguration(_))
        ));
        assert!(matches!(
            respond(
                &ws,
                &store,
                ".amber/agents/gone.md",
                "h",
                TrustDecision::Trust
            ),
            Err(RespondError::Missing(_))
        ));
    }
}
