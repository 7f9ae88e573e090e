//! The walls inside the daemon, read from the source tree: the crate graph, which crate may
//! depend on the kernel's sandbox interfaces, where a leave to run a child without the OS
//! sandbox may be minted, and that every source file opens with a `//!` header. (That only
//! amber-exec builds a `Command` is clippy's `disallowed-methods`.)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crates of the product: what the walls hold for (the tests and the scripted endpoint
/// are not).
const PRODUCT_CRATES: &[&str] = &[
    "amberd",
    "amber-cli",
    "amber-client",
    "amber-tui",
    "amber-acp",
    "amber-mcp-server",
    "amber-bench",
    "proto",
];

/// Every `.rs` file of the product crates, test modules included.
fn product_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for krate in PRODUCT_CRATES {
        rust_files(&root().join(krate), &mut files);
    }
    files
}

/// `path` relative to the workspace.
fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The files (relative to the workspace) that call `needle`, test modules included.
fn callers(needle: &str) -> Vec<String> {
    let mut found: Vec<String> = product_files()
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(needle))
        .map(|f| relative(f))
        .collect();
    found.sort();
    found
}

#[test]
fn a_leave_to_run_unsandboxed_is_minted_only_where_a_person_decided() {
    let cases: &[(&str, &[&str])] = &[
        // A person's answer, or a `sandbox = false` rule they stored: the approval gate.
        (
            "Unsandboxed::approved_by_person()",
            &[
                "amberd/exec/src/child.rs",
                // The executor honours the leave its client's gate gave (it crosses the
                // authenticated link as `unsandboxed: true`).
                "amberd/executor/src/executor.rs",
                "amberd/executor/src/processes.rs",
                "amberd/src/session/gate.rs",
                "amberd/tools/src/sandbox.rs",
                "amberd/tools/src/tests/escalation.rs",
            ],
        ),
        // The user's own (or a trusted) configuration: the session's sandbox is off, or an
        // extension's or hook's table names no sandbox.
        (
            "Unsandboxed::configured_by_user()",
            &[
                "amberd/exec/src/child.rs",
                // The relay to an executor the user's environment names (the executor
                // sandboxes each command itself).
                "amberd/src/environment/link.rs",
                // A runner's own git, with the pins: it clones a fleet session's repository
                // into a fresh workspace before any command of the session runs there, and
                // pushes a result from its pristine copy, never the workspace's `.git`.
                "amberd/executor/src/pinned_git.rs",
                "amberd/src/acp/process.rs",
                "amberd/src/hooks/process.rs",
                "amberd/src/mcp/client.rs",
                "amberd/src/plugins/external/process.rs",
                "amberd/tools/src/sandbox.rs",
                "amberd/src/workspace_git/mod.rs",
            ],
        ),
    ];
    for (mint, allowed) in cases {
        let mut allowed = allowed.to_vec();
        allowed.sort_unstable();
        assert_eq!(callers(mint), allowed, "who calls {mint}");
    }
}

#[test]
fn only_amber_exec_depends_on_the_kernels_sandbox_interfaces() {
    let root = root();
    for manifest in [
        "proto",
        "amberd",
        "amberd/llm",
        "amberd/policy",
        "amberd/store",
        "amberd/tools",
        "amberd/executor",
        "amber-client",
        "amber-cli",
        "amber-tui",
        "amber-acp",
        "amber-mcp-server",
        "amber-bench",
    ] {
        let text = std::fs::read_to_string(root.join(manifest).join("Cargo.toml")).unwrap();
        for dependency in ["landlock", "seccompiler"] {
            assert!(
                !text.contains(&format!("\n{dependency}")),
                "{manifest} depends on {dependency}: the OS sandbox lives in amber-exec"
            );
        }
    }
    let policy = std::fs::read_to_string(root.join("amberd/policy/Cargo.toml")).unwrap();
    assert!(
        !policy.contains("cfg(target_os") && !policy.contains("\nlibc"),
        "amber-policy is pure: no platform-specific dependency, no libc"
    );
    let exec = std::fs::read_to_string(root.join("amberd/exec/Cargo.toml")).unwrap();
    assert!(exec.contains("\nlandlock") && exec.contains("\nseccompiler"));
}

#[test]
fn the_leaves_import_nothing_of_the_daemon() {
    let root = root();
    for leaf in ["amberd/src/dirs.rs", "amberd/src/clock.rs"] {
        let text = std::fs::read_to_string(root.join(leaf)).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        assert!(!code.contains("crate::"), "{leaf} imports the daemon");
    }
}

/// The crates' own (non-dev) dependencies on each other, as `Cargo.toml` names them.
fn amber_dependencies(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(manifest).join("Cargo.toml")).unwrap();
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]"
                || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
        } else if in_dependencies && (line.starts_with("amber-") || line.starts_with("amberd")) {
            let name = line.split(['.', ' ', '=']).next().unwrap();
            found.push(name.to_owned());
        }
    }
    found.sort();
    found
}

#[test]
fn the_crate_graph_runs_one_way() {
    // proto ← client ← clients; proto ← llm, policy, store, exec ← tools ← executor, amberd;
    // store ← executor (checkpoints taken next to the files).
    let graph: &[(&str, &[&str])] = &[
        ("proto", &[]),
        ("amber-client", &["amber-proto"]),
        ("amberd/llm", &["amber-proto"]),
        ("amberd/policy", &["amber-proto"]),
        ("amberd/store", &["amber-proto"]),
        ("amberd/exec", &["amber-proto"]),
        (
            "amberd/tools",
            &["amber-exec", "amber-llm", "amber-policy", "amber-proto"],
        ),
        (
            "amberd/executor",
            &[
                "amber-exec",
                "amber-policy",
                "amber-proto",
                "amber-store",
                "amber-tools",
            ],
        ),
        (
            "amberd",
            &[
                "amber-exec",
                "amber-executor",
                "amber-llm",
                "amber-policy",
                "amber-proto",
                "amber-store",
                "amber-tools",
            ],
        ),
        ("amber-tui", &["amber-client", "amber-proto"]),
        (
            "amber-cli",
            &[
                "amber-acp",
                "amber-client",
                "amber-mcp-server",
                "amber-proto",
            ],
        ),
        ("amber-acp", &["amber-client", "amber-proto"]),
        ("amber-mcp-server", &["amber-client", "amber-proto"]),
        // Only the bench and the tests drive the scripted endpoint.
        (
            "amber-bench",
            &["amber-client", "amber-mock-llm", "amber-proto"],
        ),
        (
            "tests",
            &[
                "amber-client",
                "amber-exec",
                "amber-mock-llm",
                "amber-proto",
            ],
        ),
        ("tests/mock-llm", &[]),
    ];
    for (manifest, allowed) in graph {
        assert_eq!(amber_dependencies(manifest), *allowed, "{manifest}");
    }
}

#[test]
fn every_source_file_opens_with_a_header_saying_what_it_owns() {
    let root = root();
    // Every workspace member's `src` folder: its library and binaries, not its integration
    // tests, benches or examples.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest.lines().find(|l| l.starts_with("members")).unwrap();
    let mut files = Vec::new();
    for member in members.split('"').skip(1).step_by(2) {
        let src = root.join(member).join("src");
        assert!(src.is_dir(), "{member} has no src folder");
        rust_files(&src, &mut files);
    }
    assert!(files.len() > 400, "the source tree was not found");
    let mut missing: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let first = text.lines().map(str::trim).find(|l| !l.is_empty());
            !first.is_some_and(|l| l.starts_with("//!"))
        })
        .map(|f| relative(f))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "these files do not open with a `//!` header saying what they own: {missing:?}"
    );
}

/// The session kernel: the modules that run every session, whatever it can do.
const SESSION_KERNEL: &[&str] = &[
    "actor.rs",
    "approvals.rs",
    "build.rs",
    "directory.rs",
    "feature.rs",
    "gate.rs",
    "hub.rs",
    "inbox.rs",
    "listing.rs",
    "manager.rs",
    "mod.rs",
    "persist.rs",
    "queue.rs",
    "restore.rs",
    "view.rs",
    "watch.rs",
];

/// What a session can do beyond the kernel: the features (`session/features/`) and the
/// daemon-level modules they drive. Only `services.rs`, where the daemon is composed,
/// names them.
const SESSION_FEATURES: &[&str] = &[
    "features::",
    "crate::checkpoints",
    "crate::hooks",
    "crate::mcp",
    "worktree::",
    "crate::agents",
    "custom_agents",
    "budgets::",
    "SessionBudget",
    "SandboxFeature",
    "EnvironmentFeature",
    "SessionEnvironment",
    "crate::session::sandbox",
    "SessionCheckpoints",
    "SessionHooks",
    "SessionMcp",
];

#[test]
fn the_session_kernel_names_no_feature() {
    let dir = root().join("amberd/src/session");
    for file in SESSION_KERNEL {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for line in text.lines() {
            let code = line.split("//").next().unwrap();
            for feature in SESSION_FEATURES {
                assert!(
                    !code.contains(feature),
                    "session/{file} names the feature `{feature}`: {line}"
                );
            }
        }
    }
}

#[test]
fn every_session_feature_is_composed_where_the_daemon_lists_them() {
    let dir = root().join("amberd/src/session/features");
    let list = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
    let mut found = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("impl Feature for ") {
                let name = rest.trim_end_matches(" {");
                assert!(
                    list.contains(&format!("::{name})"))
                        || list.contains(&format!("::{name}::new(")),
                    "{name} is not in features::all()"
                );
                found += 1;
            }
        }
    }
    assert!(found >= 3, "{found} features found");
    // The tools start unsandboxed until a mode is put in force: without this feature every
    // command would run with amberd's rights.
    assert!(
        list.contains("sandbox::SandboxFeature"),
        "the sandbox feature is not composed"
    );
}

#[test]
fn the_test_switches_are_read_only_through_the_feature_gate() {
    // A release build (no `test-switches` feature) must honour none of them.
    let mut readers = Vec::new();
    for file in &product_files() {
        let text = std::fs::read_to_string(file).unwrap();
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        if code.contains("\"AMBER_TEST_") {
            readers.push(relative(file));
            assert!(
                code.contains("test_switches::") || code.contains("ENABLED"),
                "{} names an AMBER_TEST_ switch but does not read it through amber_exec::test_switches",
                file.display()
            );
        }
    }
    readers.sort();
    assert_eq!(
        readers,
        [
            "amberd/exec/src/sandbox_env.rs",
            "amberd/executor/src/checkpoints.rs",
            "amberd/src/checkpoints/rewind.rs",
            "amberd/src/routines/scheduler.rs",
            "amberd/tools/src/fetch/mod.rs",
        ]
    );
}

#[test]
fn every_client_match_on_event_kinds_lists_them_all() {
    // A `match` over `EventKind` in a client sits in a function that denies wildcard arms,
    // so a new event kind is a compile error where it must be decided, not a silent `_`.
    let mut files = Vec::new();
    for dir in [
        "amber-tui",
        "amber-cli",
        "amber-acp",
        "amber-mcp-server",
        "amber-client",
    ] {
        rust_files(&root().join(dir).join("src"), &mut files);
    }
    let mut matches = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let opens_match = line.trim_start().starts_with("match ")
                && line.trim_end().ends_with('{')
                && line.contains("kind");
            let on_events = lines[i + 1..lines.len().min(i + 6)].iter().any(|l| {
                let l = l.trim_start();
                l.starts_with("EventKind::") || l.starts_with("amber_proto::EventKind::")
            });
            if !(opens_match && on_events) {
                continue;
            }
            matches += 1;
            let function = (0..i)
                .rev()
                .find(|&j| {
                    let l = lines[j].trim_start();
                    l.starts_with("fn ")
                        || l.starts_with("pub fn ")
                        || l.starts_with("pub(crate) fn ")
                        || l.starts_with("async fn ")
                        || l.starts_with("pub async fn ")
                })
                .unwrap();
            assert!(
                lines[..function]
                    .iter()
                    .rev()
                    .take_while(
                        |l| l.trim_start().starts_with("#[") || l.trim_start().starts_with("///")
                    )
                    .any(|l| l.contains("deny(clippy::wildcard_enum_match_arm)")),
                "{}:{}: a match on event kinds in a function that allows a wildcard arm",
                file.display(),
                i + 1
            );
        }
    }
    assert!(matches >= 6, "found {matches} matches on event kinds");
}

#[test]
fn a_poisoned_lock_is_taken_in_one_place() {
    // `amber_proto::sync` is the one helper; nothing else recovers a poisoned lock by hand.
    let by_hand: Vec<String> = product_files()
        .iter()
        .filter(|f| !f.ends_with("proto/src/sync.rs"))
        .filter(|f| {
            let text = std::fs::read_to_string(f)
                .unwrap()
                .replace(char::is_whitespace, "");
            [
                ".lock().unwrap_or_else(",
                ".read().unwrap_or_else(",
                ".write().unwrap_or_else(",
            ]
            .iter()
            .any(|call| text.contains(call))
        })
        .map(|f| relative(f))
        .collect();
    assert!(by_hand.is_empty(), "locks recovered by hand: {by_hand:?}");
}

#[test]
fn each_crate_links_its_integration_tests_as_one_binary() {
    let root = root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest.lines().find(|l| l.starts_with("members")).unwrap();
    for member in members.split('"').skip(1).step_by(2) {
        let dir = root.join(member).join("tests");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let files = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
            .count();
        if files > 1 {
            let own = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
            assert!(
                own.contains("autotests = false") && own.contains("path = \"tests/all.rs\""),
                "{member}: {files} integration-test files, each its own binary; make them modules of tests/all.rs"
            );
        }
    }
}
