//! skills: front matter parsing, discovery in the workspace and the user
//! folder (workspace shadows user), `list`, `load`, unknown names, summary, and the
//! workspace's folder under the data dir.

use std::path::Path;

use amber_proto::ToolStatus;
use serde_json::json;

use super::workspace;
use crate::skills::{self, SkillOrigin, SkillsTool};
use crate::{Tool, ToolContext, ToolOutcome};

fn write_skill(root: &Path, folder: &str, text: &str) {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), text).unwrap();
}

async fn call(tool: &SkillsTool, ctx: &ToolContext, args: serde_json::Value) -> ToolOutcome {
    tool.call(args, ctx).await
}

#[test]
fn front_matter_is_parsed() {
    let doc = skills::parse(
        "---\nname: deploy\ndescription: \"Ship it: \\\"now\\\"\"\nother: x\n---\n\n# Steps\nrun make\n",
    );
    assert_eq!(doc.name.as_deref(), Some("deploy"));
    assert_eq!(doc.description.as_deref(), Some("Ship it: \"now\""));
    assert_eq!(doc.body, "# Steps\nrun make\n");

    let doc = skills::parse(
        "---\r\nname: 'it''s'\r\ndescription: >\r\n  folded\r\n  text\r\n---\r\nbody",
    );
    assert_eq!(doc.name.as_deref(), Some("it's"));
    assert_eq!(doc.description.as_deref(), Some("folded text"));
    assert_eq!(doc.body, "body");

    // No front matter: no name, the first non-empty line describes it.
    let doc = skills::parse("\n\n# Review checklist\n- a\n");
    assert_eq!(doc.name, None);
    assert_eq!(doc.description.as_deref(), Some("Review checklist"));
    assert_eq!(doc.body, "# Review checklist\n- a\n");

    // An unterminated block is not front matter.
    let doc = skills::parse("---\nname: x\n");
    assert_eq!(doc.name, None);
    assert_eq!(doc.body, "---\nname: x\n");
}

#[tokio::test]
async fn workspace_skills_shadow_user_skills() {
    let (_dir, ctx) = workspace();
    let user = tempfile::tempdir().unwrap();
    let ws_skills = ctx.workspace.join(".amber/skills");
    write_skill(
        &ws_skills,
        "deploy",
        "---\nname: deploy\ndescription: Deploy this repo\n---\nworkspace body\n",
    );
    write_skill(&ws_skills, "notes", "Plain notes skill\n\nmore\n");
    write_skill(
        user.path(),
        "deploy-user",
        "---\nname: deploy\ndescription: Generic deploy\n---\nuser body\n",
    );
    write_skill(
        user.path(),
        "lint",
        "---\nname: lint\ndescription: Lint things\n---\nlint body\n",
    );
    std::fs::create_dir_all(user.path().join("empty")).unwrap();

    let found = skills::discover(&ctx.workspace, Some(user.path()));
    let names: Vec<(&str, SkillOrigin)> =
        found.iter().map(|s| (s.name.as_str(), s.origin)).collect();
    assert_eq!(
        names,
        vec![
            ("deploy", SkillOrigin::Workspace),
            ("lint", SkillOrigin::User),
            ("notes", SkillOrigin::Workspace)
        ]
    );

    let tool = SkillsTool::with_user_dir(Some(user.path().to_path_buf()));
    assert!(tool.read_only());
    let out = call(&tool, &ctx, json!({"action": "list"})).await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert_eq!(
        out.output,
        "- deploy: Deploy this repo\n- lint: Lint things\n- notes: Plain notes skill"
    );

    let out = call(&tool, &ctx, json!({"action": "load", "name": "deploy"})).await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(out.output.ends_with("\n\nworkspace body"), "{}", out.output);
    assert!(
        out.output.contains(".amber/skills/deploy/SKILL.md"),
        "{}",
        out.output
    );
    let out = call(&tool, &ctx, json!({"action": "load", "name": "LINT"})).await;
    assert!(out.output.ends_with("\n\nlint body"), "{}", out.output);
    let out = call(&tool, &ctx, json!({"action": "load", "name": "notes"})).await;
    assert!(
        out.output.ends_with("\n\nPlain notes skill\n\nmore"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn unknown_names_and_bad_arguments_are_errors() {
    let (_dir, ctx) = workspace();
    write_skill(
        &ctx.workspace.join(".amber/skills"),
        "a",
        "---\nname: alpha\n---\nx\n",
    );
    write_skill(
        &ctx.workspace.join(".amber/skills"),
        "b",
        "---\nname: beta\n---\ny\n",
    );
    let tool = SkillsTool::with_user_dir(None);
    let out = call(&tool, &ctx, json!({"action": "load", "name": "gamma"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.output, "no skill named `gamma`; available: alpha, beta");
    let out = call(&tool, &ctx, json!({"action": "load"})).await;
    assert!(out.output.contains("`load` needs `name`"), "{}", out.output);
    let out = call(&tool, &ctx, json!({"action": "run"})).await;
    assert!(
        out.output.contains("`action` must be `list` or `load`"),
        "{}",
        out.output
    );
    let out = call(&tool, &ctx, json!({})).await;
    assert!(out.output.contains("missing required field `action`"));
}

#[tokio::test]
async fn no_skills_and_skills_added_later() {
    let (_dir, ctx) = workspace();
    let tool = SkillsTool::with_user_dir(None);
    let out = call(&tool, &ctx, json!({"action": "list"})).await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.output.starts_with("no skills found"), "{}", out.output);
    assert_eq!(skills::summary_with(&ctx.workspace, None), None);

    write_skill(
        &ctx.workspace.join(".amber/skills"),
        "fmt",
        "---\nname: fmt\ndescription: Format the code\n---\ncargo fmt\n",
    );
    let out = call(&tool, &ctx, json!({"action": "list"})).await;
    assert_eq!(out.output, "- fmt: Format the code");
    assert_eq!(
        skills::summary_with(&ctx.workspace, None).unwrap(),
        "Skills available (load with the skills tool):\n- fmt: Format the code"
    );
}

#[tokio::test]
async fn workspace_skills_may_not_point_outside() {
    let (_dir, ctx) = workspace();
    let outside = tempfile::tempdir().unwrap();
    write_skill(
        outside.path(),
        "secret",
        "---\nname: secret\n---\nprivate\n",
    );
    let skills_dir = ctx.workspace.join(".amber/skills");
    std::fs::create_dir_all(&skills_dir).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), skills_dir.join("secret")).unwrap();
    assert!(skills::discover(&ctx.workspace, None).is_empty());
    let tool = SkillsTool::with_user_dir(None);
    let out = call(&tool, &ctx, json!({"action": "load", "name": "secret"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    // The same folder as a user skill is fine.
    let found = skills::discover(&ctx.workspace, Some(outside.path()));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].origin, SkillOrigin::User);
}

#[test]
fn workspace_dir_is_stable_and_canonical() {
    let data = Path::new("/data");
    let ws = tempfile::tempdir().unwrap();
    let a = skills::workspace_skills_dir(data, ws.path());
    let b = skills::workspace_skills_dir(data, &ws.path().join("sub/.."));
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let c = skills::workspace_skills_dir(data, &ws.path().join("sub/.."));
    assert_eq!(a, c);
    assert_ne!(
        a, b,
        "a path that cannot be canonicalised is hashed as given"
    );
    assert!(a.starts_with("/data/skills"));
    assert_eq!(a.file_name().unwrap().len(), 16);
}
