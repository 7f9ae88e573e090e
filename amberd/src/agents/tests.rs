//! Agent sources: precedence, bad files, names, confinement, the bundled agents.

use std::fs;

use amber_proto::{AgentSource, Mode};
use tempfile::TempDir;

use super::*;

struct Dirs {
    _tmp: TempDir,
    workspace: PathBuf,
    user: PathBuf,
}

impl Dirs {
    fn new() -> Dirs {
        let tmp = TempDir::new().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let workspace = root.join("ws");
        let user = root.join("user-agents");
        fs::create_dir_all(workspace.join(WORKSPACE_AGENTS)).unwrap();
        fs::create_dir_all(&user).unwrap();
        Dirs {
            _tmp: tmp,
            workspace,
            user,
        }
    }

    fn dirs(&self) -> AgentDirs {
        AgentDirs::with(Some(&self.workspace), Some(&self.user))
    }

    fn workspace_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.workspace.join(WORKSPACE_AGENTS).join(name);
        fs::write(&path, text).unwrap();
        path
    }

    fn user_file(&self, name: &str, text: &str) {
        fs::write(self.user.join(name), text).unwrap();
    }
}

fn agent_text(description: &str) -> String {
    format!("---\ndescription: {description}\n---\nPrompt of {description}.\n")
}

fn listed(dirs: &AgentDirs) -> Vec<(String, AgentSource)> {
    list(dirs, &|_| true)
        .into_iter()
        .map(|a| (a.name, a.source))
        .collect()
}

#[test]
fn the_bundled_agents_parse_and_run_in_read_mode() {
    for (name, _) in BUNDLED {
        let agent = find(&AgentDirs::with(None, None), name).unwrap();
        assert_eq!(agent.source, AgentSource::Bundled);
        assert_eq!(agent.definition.mode, Some(Mode::Read), "{name}");
        let tools = agent.definition.tools.clone().unwrap();
        assert!(tools.iter().any(|t| t == "todowrite"), "{name}: {tools:?}");
        assert!(!tools.iter().any(|t| t == "write" || t == "edit"), "{name}");
    }
    let review = find(&AgentDirs::with(None, None), "review").unwrap();
    assert!(review.definition.prompt.contains("git diff"));
    assert!(review.definition.prompt.contains("git status"));
}

#[test]
fn workspace_beats_user_beats_bundled() {
    let d = Dirs::new();
    d.workspace_file("mine.md", &agent_text("workspace mine"));
    d.user_file("mine.md", &agent_text("user mine"));
    d.user_file("plan.md", &agent_text("user plan"));
    d.workspace_file("docs.md", &agent_text("workspace docs"));
    d.user_file("review.md", &agent_text("user review"));
    assert_eq!(
        listed(&d.dirs()),
        [
            ("docs".to_owned(), AgentSource::Workspace),
            ("mine".to_owned(), AgentSource::Workspace),
            ("plan".to_owned(), AgentSource::User),
            ("review".to_owned(), AgentSource::User),
        ]
    );
    let mine = find(&d.dirs(), "mine").unwrap();
    assert_eq!(mine.definition.description, "workspace mine");
    assert_eq!(mine.definition.prompt, "Prompt of workspace mine.");
    // A workspace agent is pinned to the bytes it was read from; others need no trust.
    let pinned = mine.pinned.clone().unwrap();
    assert_eq!(pinned.relative, ".amber/agents/mine.md");
    assert_eq!(
        pinned.hash,
        blake3::hash(agent_text("workspace mine").as_bytes())
            .to_hex()
            .to_string()
    );
    assert_eq!(find(&d.dirs(), "review").unwrap().source, AgentSource::User);
    assert_eq!(find(&d.dirs(), "review").unwrap().pinned, None);
    // Without a workspace: the user's and the bundled ones.
    let no_workspace = AgentDirs::with(None, Some(&d.user));
    assert_eq!(
        listed(&no_workspace),
        [
            ("mine".to_owned(), AgentSource::User),
            ("plan".to_owned(), AgentSource::User),
            ("review".to_owned(), AgentSource::User),
        ]
    );
}

#[test]
fn a_bad_file_is_left_out_of_the_list_and_its_use_names_the_file() {
    let d = Dirs::new();
    let bad = d.workspace_file(
        "broken.md",
        "---\ndescription: d\nmode: sideways\n---\nbody\n",
    );
    d.workspace_file("good.md", &agent_text("good"));
    // A broken workspace `plan` shadows the bundled one rather than silently falling back.
    d.workspace_file("plan.md", "no front matter here\n");
    d.workspace_file("Bad Name.md", &agent_text("spaces"));
    fs::write(d.workspace.join(WORKSPACE_AGENTS).join("notes.txt"), "x").unwrap();
    assert_eq!(
        listed(&d.dirs()),
        [
            ("good".to_owned(), AgentSource::Workspace),
            ("review".to_owned(), AgentSource::Bundled),
        ]
    );
    let err = find(&d.dirs(), "broken").unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&bad.display().to_string()) && message.contains("sideways"),
        "{message}"
    );
    let plan = find(&d.dirs(), "plan").unwrap_err().to_string();
    assert!(
        plan.contains("plan.md") && plan.contains("bundled agent `plan`"),
        "{plan}"
    );
}

#[test]
fn a_workspace_agent_may_not_take_a_bundled_name_even_a_good_one() {
    let d = Dirs::new();
    for name in ["plan", "review"] {
        d.workspace_file(&format!("{name}.md"), &agent_text("yolo look-alike"));
        let err = find(&d.dirs(), name).unwrap_err();
        assert!(
            matches!(err, AgentError::ShadowsBundled { .. }),
            "{name}: {err}"
        );
        assert!(err.to_string().contains("may not take the name"), "{err}");
    }
    // Left out of the list: neither the look-alike nor, silently, the bundled one.
    assert!(listed(&d.dirs()).is_empty(), "{:?}", listed(&d.dirs()));
}

#[test]
fn unreadable_and_oversized_files_are_bad_files() {
    let d = Dirs::new();
    fs::write(
        d.workspace.join(WORKSPACE_AGENTS).join("binary.md"),
        [b'-', b'-', b'-', b'\n', 0xff, 0xfe],
    )
    .unwrap();
    let big = format!(
        "{}{}",
        agent_text("big"),
        "x".repeat(MAX_FILE_BYTES as usize)
    );
    d.workspace_file("big.md", &big);
    fs::create_dir(d.workspace.join(WORKSPACE_AGENTS).join("dir.md")).unwrap();
    let utf8 = find(&d.dirs(), "binary").unwrap_err().to_string();
    assert!(utf8.contains("UTF-8"), "{utf8}");
    let size = find(&d.dirs(), "big").unwrap_err().to_string();
    assert!(size.contains("bytes"), "{size}");
    let dir = find(&d.dirs(), "dir").unwrap_err().to_string();
    assert!(dir.contains("not a regular file"), "{dir}");
}

#[test]
fn unknown_and_invalid_names() {
    let d = Dirs::new();
    d.workspace_file("docs.md", &agent_text("docs"));
    match find(&d.dirs(), "nope").unwrap_err() {
        AgentError::Unknown { name, known } => {
            assert_eq!(name, "nope");
            assert_eq!(known, "docs, plan, review");
        }
        other => panic!("{other}"),
    }
    for name in [
        "",
        "../plan",
        "a/b",
        ".hidden",
        "-x",
        "a.b",
        &"x".repeat(65),
    ] {
        assert_eq!(
            find(&d.dirs(), name).unwrap_err(),
            AgentError::InvalidName(name.to_owned()),
            "{name:?}"
        );
    }
    assert!(valid_name("Code_Reviewer-2"));
}

#[test]
fn a_workspace_agent_may_not_lead_outside_the_workspace() {
    let d = Dirs::new();
    let outside = d.user.parent().unwrap().join("secret.md");
    fs::write(&outside, agent_text("outside")).unwrap();
    std::os::unix::fs::symlink(&outside, d.workspace.join(WORKSPACE_AGENTS).join("leak.md"))
        .unwrap();
    let err = find(&d.dirs(), "leak").unwrap_err().to_string();
    assert!(err.contains("not inside the workspace"), "{err}");
    assert!(!listed(&d.dirs()).iter().any(|(n, _)| n == "leak"));
    // A link that stays inside is fine.
    let inside = d.workspace.join("agent.md");
    fs::write(&inside, agent_text("inside")).unwrap();
    std::os::unix::fs::symlink(&inside, d.workspace.join(WORKSPACE_AGENTS).join("ok.md")).unwrap();
    assert_eq!(
        find(&d.dirs(), "ok").unwrap().definition.description,
        "inside"
    );
}
