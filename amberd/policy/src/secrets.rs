//! Secret locations: where credentials live. Reading them asks in every mode, yolo
//! included, unless a rule allows the path — for the file tools and for what commands read.
//!
//! - below the daemon's `$HOME`: `.ssh`, `.aws`, `.gnupg`, `.config/amber`, and the usual
//!   credential files (`.netrc`, `.git-credentials`, `.docker/config.json`, `.kube`,
//!   `.config/gh`, `.npmrc`, `.pypirc`, `.cargo/credentials*`);
//! - amber's own data directory and config file, `$XDG_CONFIG_HOME/amber`, and its
//!   state directory (`$XDG_STATE_HOME/amber`: the daemon's log);
//! - `.env` files anywhere (`.env`, `.env.local` …; not `.env.example` and friends, which
//!   are meant to be committed).
//!
//! A directory read recursively (`grep -r`, `rg`, `find`) that holds a secret location
//! reads it too. A secret directory that holds the workspace is ignored (the user chose to
//! work there). The daemon installs its locations at start ([`SecretLocations::install`]);
//! until then they come from the process environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Below `$HOME`.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/amber",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".kube",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// `.env.*` names that hold no secrets by convention.
const ENV_TEMPLATES: &[&str] = &["example", "sample", "template", "dist", "defaults"];

/// Where secrets live for this daemon.
#[derive(Debug, Clone, Default)]
pub struct SecretLocations {
    home: Option<PathBuf>,
    places: Vec<PathBuf>,
}

impl SecretLocations {
    /// `home` is the daemon's `$HOME`; `amber` its data directory, config file and config
    /// directory (whichever are known).
    pub(crate) fn new(home: Option<PathBuf>, amber: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut places: Vec<PathBuf> = home
            .iter()
            .flat_map(|h| HOME_SECRETS.iter().map(move |s| h.join(s)))
            .collect();
        places.extend(amber.into_iter().filter(|p| p.is_absolute()));
        let canonical: Vec<PathBuf> = places
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .filter(|c| !places.contains(c))
            .collect();
        places.extend(canonical);
        Self { home, places }
    }

    /// From an environment: `$HOME`, `$XDG_CONFIG_HOME/amber`, `$AMBER_DATA_DIR`,
    /// `$XDG_DATA_HOME/amber`, `$XDG_STATE_HOME/amber` (and their `~/.local` defaults),
    /// `$AMBER_CONFIG`, plus `extra` (the daemon's real data dir and config file).
    pub fn from_env(
        env: &impl Fn(&str) -> Option<OsString>,
        extra: impl IntoIterator<Item = PathBuf>,
    ) -> Self {
        let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = var("HOME");
        let mut amber: Vec<PathBuf> = extra.into_iter().collect();
        amber.extend(var("XDG_CONFIG_HOME").map(|d| d.join("amber")));
        amber.extend(var("XDG_DATA_HOME").map(|d| d.join("amber")));
        amber.extend(var("XDG_STATE_HOME").map(|d| d.join("amber")));
        amber.extend(home.as_ref().map(|h| h.join(".local/share/amber")));
        amber.extend(home.as_ref().map(|h| h.join(".local/state/amber")));
        amber.extend(var("AMBER_DATA_DIR"));
        amber.extend(var("AMBER_CONFIG"));
        Self::new(home, amber)
    }

    /// Every secret location but `.env` files (which belong to projects): what the OS
    /// sandbox masks.
    pub fn locations(&self) -> &[PathBuf] {
        &self.places
    }

    pub(crate) fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// Why reading `path` (absolute; lexical or resolved) reads a secret, if it does.
    pub(crate) fn secret(&self, path: &Path, recursive: bool, workspace: &Path) -> Option<String> {
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_env_file)
        {
            return Some(format!("{} is a .env file", path.display()));
        }
        self.places
            .iter()
            .filter(|place| !workspace.starts_with(place))
            .find(|place| path.starts_with(place) || (recursive && place.starts_with(path)))
            .map(|place| {
                if path.starts_with(place) {
                    format!("{} is a secret location", path.display())
                } else {
                    format!(
                        "{} holds the secret location {}",
                        path.display(),
                        place.display()
                    )
                }
            })
    }

    /// Makes these the daemon's secret locations (once, at start; later calls are ignored).
    pub fn install(self) {
        let _ = INSTALLED.set(self);
    }

    /// The installed locations, or those of the process environment.
    pub fn installed() -> &'static SecretLocations {
        INSTALLED.get_or_init(|| SecretLocations::from_env(&|k| std::env::var_os(k), []))
    }
}

/// `.env`, `.env.local`, `.env.production` (not `.env.example`).
fn is_env_file(name: &str) -> bool {
    name == ".env"
        || name
            .strip_prefix(".env.")
            .is_some_and(|rest| !rest.is_empty() && !ENV_TEMPLATES.contains(&rest))
}

/// The daemon's secret locations, once [`SecretLocations::install`]ed.
static INSTALLED: OnceLock<SecretLocations> = OnceLock::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_locations_and_env_files() {
        let s = SecretLocations::new(
            Some(PathBuf::from("/home/u")),
            [PathBuf::from("/data/amber"), PathBuf::from("relative")],
        );
        let ws = Path::new("/home/u/src/proj");
        let secret = |p: &str, r: bool| s.secret(Path::new(p), r, ws).is_some();
        assert!(secret("/home/u/.ssh/id_ed25519", false));
        assert!(secret("/home/u/.ssh", false));
        assert!(secret("/home/u/.aws/credentials", false));
        assert!(secret("/home/u/.config/amber/config.toml", false));
        assert!(secret("/data/amber/sessions/x.jsonl", false));
        assert!(secret("/home/u/src/proj/.env", false));
        assert!(secret("/home/u/src/proj/api/.env.local", false));
        assert!(
            secret("/home/u", true),
            "a recursive read of home reads ~/.ssh"
        );
        assert!(!secret("/home/u", false));
        assert!(!secret("/home/u/src/proj/.env.example", false));
        assert!(!secret("/home/u/src/proj/src/main.rs", true));
        assert!(!secret("/home/u/.sshx", false));
        assert!(!secret("/relative", false));
        // A workspace inside a secret directory makes that directory ordinary.
        let inside = Path::new("/data/amber/worktrees/w");
        assert!(
            s.secret(Path::new("/data/amber/worktrees/w/a"), false, inside)
                .is_none()
        );
    }
}
