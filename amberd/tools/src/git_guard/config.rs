//! Which git configuration a repository the command made may keep: the keys `git init`,
//! `git clone`, a submodule's checkout and `git config user.*` write ([`BENIGN`]) and
//! nothing else; [`first_refused_key`] finds the first other one, [`minimal_config`]
//! writes what replaces a refused config.

/// `section.key` names a new repository's config may hold (lower case; `*` stands for any
/// subsection): what `git init`, `git clone`, a submodule's checkout, `git config user.*`
/// and a branch's upstream write.
const BENIGN: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.worktree",
    "extensions.objectformat",
    "extensions.refstorage",
    "init.defaultbranch",
    "user.name",
    "user.email",
    "branch.*.remote",
    "branch.*.merge",
    "remote.*.url",
    "remote.*.fetch",
    "submodule.*.url",
    "submodule.*.active",
];

/// Values that make a benign key run a program: a remote helper (`ext::sh -c …`,
/// `fd::`…) or an option smuggled as a host.
fn runs_something(value: &str) -> bool {
    let value = value.trim().trim_matches('"').trim_start();
    value.contains("::") || value.starts_with('-') || value.contains("ProxyCommand")
}

/// The first key of `text` (a git config file) that is not [`BENIGN`], or a line that is
/// not plainly a section, a key or a comment (anything unusual counts as refused).
pub(super) fn first_refused_key(text: &str) -> Option<String> {
    let mut section = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if raw.trim_end().ends_with('\\') {
            return Some(format!("a continued line ({line})"));
        }
        if let Some(header) = line.strip_prefix('[') {
            let Some((inside, rest)) = header.split_once(']') else {
                return Some(format!("an unreadable line ({line})"));
            };
            if !rest.trim().is_empty() && !rest.trim().starts_with(['#', ';']) {
                return Some(format!("an unreadable line ({line})"));
            }
            section = section_name(inside);
            continue;
        }
        let name = line
            .split(['=', ' ', '\t'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let key = format!("{section}.{name}");
        let value = line.split_once('=').map_or("", |(_, value)| value);
        if !BENIGN.iter().any(|benign| matches(benign, &key)) || runs_something(value) {
            return Some(key);
        }
    }
    None
}

/// `core` → `core`; `branch "main"` → `branch.*`; `branch.main` (old syntax) → `branch.*`.
fn section_name(inside: &str) -> String {
    let inside = inside.trim();
    let (name, sub) = match inside.split_once([' ', '\t', '.']) {
        Some((name, sub)) => (name, !sub.trim().is_empty()),
        None => (inside, false),
    };
    let name = name.to_ascii_lowercase();
    if sub { format!("{name}.*") } else { name }
}

fn matches(pattern: &str, key: &str) -> bool {
    pattern == key
        || pattern.split('.').count() == key.split('.').count()
            && pattern
                .split('.')
                .zip(key.split('.'))
                .all(|(p, k)| p == "*" || p == k)
}

/// A config with only what the repository needs to be read: its format version and object
/// format, as the refused one said.
pub(super) fn minimal_config(refused: &str) -> String {
    let value_of = |key: &str| {
        refused.lines().find_map(|l| {
            let (name, value) = l.trim().split_once('=')?;
            (name.trim().eq_ignore_ascii_case(key)).then(|| value.trim().to_owned())
        })
    };
    let version = value_of("repositoryformatversion")
        .filter(|v| v == "0" || v == "1")
        .unwrap_or_else(|| "0".to_owned());
    let mut out = format!(
        "[core]\n\trepositoryformatversion = {version}\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
    );
    let formats: Vec<(&str, String)> = ["objectformat", "refstorage"]
        .into_iter()
        .filter_map(|key| {
            value_of(key)
                .filter(|v| v.chars().all(|c| c.is_ascii_alphanumeric()))
                .map(|v| (key, v))
        })
        .collect();
    if !formats.is_empty() {
        out.push_str("[extensions]\n");
        for (key, value) in formats {
            out.push_str(&format!("\t{key} = {value}\n"));
        }
    }
    out
}
