//! The configuration amberd's own git calls are pinned to, whatever the repository's
//! configuration says: nothing git could start on its own is started.

/// `-c` settings every call gets (later `-c` wins over every config file).
pub(crate) const PINNED: &[&str] = &[
    // Programs git starts by itself.
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.sshCommand=false",
    "core.askPass=false",
    "core.editor=false",
    "sequence.editor=false",
    "log.showSignature=false",
    "gpg.program=false",
    "credential.helper=",
    "protocol.allow=never",
    // Work git could start behind a query, and the programs that work could start.
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "core.untrackedCache=false",
    "status.submoduleSummary=false",
    "core.attributesFile=/dev/null",
];

/// Set in every call's environment: no prompt, no optional lock (a query must not take the
/// index lock a concurrent `git` in the workspace needs), no replace refs.
pub(crate) const FIXED_ENV: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_PROTOCOL_FROM_USER", "0"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
];

/// The call that lists the filter drivers' keys (NUL-separated `key\nvalue` records).
pub(crate) const LIST_FILTERS: &[&str] = &["config", "--null", "--get-regexp", r"^filter\."];

/// The driver names in `git config --null --get-regexp '^filter\.'` output: the part
/// between `filter.` and the last `.` of each key (a name may hold dots).
pub(crate) fn filter_drivers(listed: &str) -> Vec<String> {
    let mut names: Vec<String> = listed
        .split('\0')
        .filter_map(|record| record.split('\n').next())
        .filter_map(|key| {
            let rest = key.strip_prefix("filter.")?;
            let (name, _field) = rest.rsplit_once('.')?;
            (!name.is_empty()).then(|| name.to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `-c filter.NAME.{clean,smudge,process}=` (empty: no command) and `required=false` (an
/// empty required filter would fail the call) for each driver.
pub(crate) fn filter_pins(drivers: &[String]) -> Vec<String> {
    drivers
        .iter()
        .flat_map(|name| {
            ["clean=", "smudge=", "process=", "required=false"]
                .into_iter()
                .flat_map(move |field| ["-c".to_owned(), format!("filter.{name}.{field}")])
        })
        .collect()
}
