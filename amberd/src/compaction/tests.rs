//! `compact` end to end against a scripted local OpenAI-compatible endpoint (axum): the
//! extract request's messages start with exactly the classify request's messages, the
//! rebuilt context, and failures of either stage.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_llm::{ChatResponse, LlmClient, LlmSettings};
use amber_proto::{Message, Role, ToolCall};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::apply::MEMORIES_HEADING;
use super::*;
use crate::agent::metered::{ModelRequests, RequestError};
use amber_tools::skills::workspace_skills_dir;

/// The bare client, unmetered: the pipeline on its own, without a session's budget.
impl ModelRequests for LlmClient {
    fn send<'a>(
        &'a self,
        request: &'a amber_llm::ChatRequest,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> futures::future::BoxFuture<'a, Result<ChatResponse, RequestError>> {
        Box::pin(async move {
            self.stream_chat(request, cancel, on_event)
                .await
                .map_err(RequestError::Api)
        })
    }
}

/// A scripted reply: an SSE stream carrying this text, or an HTTP status with a body.
enum Reply {
    Text(String),
    Status(u16, String),
}

#[derive(Default)]
struct Mock {
    script: Mutex<VecDeque<Reply>>,
    bodies: Mutex<Vec<Value>>,
}

impl Mock {
    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

async fn chat(State(mock): State<Arc<Mock>>, body: String) -> Response {
    mock.bodies
        .lock()
        .unwrap()
        .push(serde_json::from_str(&body).unwrap());
    let reply = mock.script.lock().unwrap().pop_front();
    match reply {
        Some(Reply::Text(text)) => {
            let chunks = [
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}),
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            ];
            let mut sse: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
            sse.push_str("data: [DONE]\n\n");
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(sse))
        }
        Some(Reply::Status(code, body)) => Response::builder().status(code).body(Body::from(body)),
        None => Response::builder()
            .status(500)
            .body(Body::from("script exhausted")),
    }
    .unwrap()
}

async fn serve(script: Vec<Reply>) -> (Arc<Mock>, LlmClient) {
    let mock = Arc::new(Mock {
        script: Mutex::new(script.into()),
        ..Mock::default()
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = LlmClient::new(LlmSettings {
        base_url: Some(format!("http://{addr}/v1")),
        model: "default-model".into(),
        max_retries: 0,
        retry_base: Duration::from_millis(1),
        idle_timeout: Duration::from_secs(10),
        ..LlmSettings::default()
    })
    .unwrap();
    (mock, client)
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

/// ids: 1 user, 2-3 step, 4 assistant, 5 user, 6-7 step, 8 user (the tail).
fn history() -> Vec<Message> {
    vec![
        Message::system("You are amber."),
        Message::user("Fix the failing test in src/lib.rs"),
        Message::assistant("", vec![call("c1", "read", r#"{"path":"src/lib.rs"}"#)]),
        Message::tool("c1", r#"{"status":"ok","output":"fn add() {}"}"#),
        Message::assistant("The bug is in add.", Vec::new()),
        Message::user("ok, and run the tests"),
        Message::assistant("", vec![call("c2", "bash", r#"{"command":"cargo test"}"#)]),
        Message::tool("c2", r#"{"status":"ok","output":"1 passed"}"#),
        Message::user("thanks, now the docs"),
    ]
}

const CLASSIFY_ANSWER: &str = "Here you go:\n```json\n{\"classification\": [\
    {\"id\": 1, \"class\": \"core\"}, {\"id\": 2, \"class\": \"prune\"}, \
    {\"id\": 3, \"class\": \"prune\"}, {\"id\": 4, \"class\": \"context\"}, \
    {\"id\": 6, \"class\": \"prune\"}, {\"id\": 7, \"class\": \"prune\"}]}\n```";

const EXTRACT_ANSWER: &str = "{\"memories\": [\"The bug was in add() in src/lib.rs\"], \
    \"skills\": [{\"name\": \"../run tests\", \"description\": \"How to run the tests\", \
    \"body\": \"Run `cargo test`.\"}]}";

#[tokio::test]
async fn extract_request_replays_the_classify_request_as_its_prefix() {
    let (mock, llm) = serve(vec![
        Reply::Text(CLASSIFY_ANSWER.into()),
        Reply::Text(EXTRACT_ANSWER.into()),
    ])
    .await;
    let messages = history();
    let s = CompactionSettings::default();
    let out = compact(
        target(&llm, "small-model", "the head"),
        &messages,
        &[],
        &s,
        &CancellationToken::new(),
        &mut |_| {},
    )
    .await
    .unwrap();

    let bodies = mock.bodies();
    assert_eq!(bodies.len(), 2);
    let classify = bodies[0]["messages"].as_array().unwrap();
    let extract = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(classify.len(), 3);
    assert_eq!(extract.len(), classify.len() + 2);
    assert_eq!(
        &extract[..classify.len()],
        &classify[..],
        "content-identical prefix"
    );
    assert_eq!(extract[3]["role"], "assistant");
    assert_eq!(extract[3]["content"], CLASSIFY_ANSWER);
    assert_eq!(extract[4]["role"], "user");
    for body in &bodies {
        assert_eq!(body["model"], "small-model");
        assert!(body.get("tools").is_none());
    }
    let transcript = classify[1]["content"].as_str().unwrap();
    assert!(transcript.contains("[id 1] user: Fix the failing test"));
    assert!(transcript.contains("[id 8] user: thanks, now the docs"));
    assert!(
        classify[2]["content"]
            .as_str()
            .unwrap()
            .contains("\"classification\"")
    );
    assert!(
        extract[4]["content"]
            .as_str()
            .unwrap()
            .contains("\"memories\"")
    );

    // Rebuilt: system, memories, core 1, context 4, 5 (unlisted: context), the tail 8.
    let roles: Vec<Role> = out.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::User
        ]
    );
    assert_eq!(out.messages[0], messages[0]);
    assert!(out.messages[1].content.starts_with(MEMORIES_HEADING));
    assert!(out.messages[1].content.contains("- The bug was in add()"));
    assert_eq!(
        out.messages[2..],
        [
            messages[1].clone(),
            messages[4].clone(),
            messages[5].clone(),
            messages[8].clone()
        ]
    );
    assert_eq!(out.memories, vec!["The bug was in add() in src/lib.rs"]);
    assert_eq!(out.skills.len(), 1);
    assert_eq!(out.tokens_before, estimate_tokens(&messages, &[]));
    assert_eq!(out.tokens_after, estimate_tokens(&out.messages, &[]));

    // The skill lands in the workspace's data-dir folder, loadable by the skills tool.
    let data = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let dir = workspace_skills_dir(data.path(), ws.path());
    let written = save_skills(&dir, &out.skills).unwrap();
    assert_eq!(written, vec![dir.join("run-tests").join("SKILL.md")]);
    let found = amber_tools::skills::discover_all(ws.path(), Some(&dir), None);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "run-tests");
    assert_eq!(found[0].description, "How to run the tests");
}

#[tokio::test]
async fn a_failing_extract_request_is_an_error() {
    let (mock, llm) = serve(vec![
        Reply::Text(CLASSIFY_ANSWER.into()),
        Reply::Status(400, r#"{"error":{"message":"bad request"}}"#.into()),
    ])
    .await;
    let s = CompactionSettings::default();
    let err = compact(
        target(&llm, "", ""),
        &history(),
        &[],
        &s,
        &CancellationToken::new(),
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::Llm(ApiError::Http { status: 400, .. })
        ),
        "{err:?}"
    );
    assert_eq!(mock.bodies().len(), 2);
}

#[tokio::test]
async fn unparsable_answers_are_errors_at_their_stage() {
    let (mock, llm) = serve(vec![Reply::Text("I'd rather not.".into())]).await;
    let s = CompactionSettings::default();
    let cancel = CancellationToken::new();
    let err = compact(
        target(&llm, "", ""),
        &history(),
        &[],
        &s,
        &cancel,
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::Parse {
                stage: "classify",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        mock.bodies().len(),
        1,
        "no extract request after a bad classification"
    );

    let (_mock, llm) = serve(vec![
        Reply::Text(CLASSIFY_ANSWER.into()),
        Reply::Text("{\"memories\": \"not a list\"}".into()),
    ])
    .await;
    let err = compact(
        target(&llm, "", ""),
        &history(),
        &[],
        &s,
        &cancel,
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::Parse {
                stage: "extract",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "compaction_parse");
}

#[tokio::test]
async fn nothing_to_compact_and_cancel_make_no_requests() {
    let (mock, llm) = serve(Vec::new()).await;
    let s = CompactionSettings::default();
    let short = vec![Message::system("sys"), Message::user("hi")];
    let err = compact(
        target(&llm, "", ""),
        &short,
        &[],
        &s,
        &CancellationToken::new(),
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CompactionError::NothingToCompact), "{err:?}");
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = compact(
        target(&llm, "", ""),
        &history(),
        &[],
        &s,
        &cancel,
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CompactionError::Cancelled), "{err:?}");
    assert!(mock.bodies().is_empty());
}

#[test]
fn budget_follows_headroom() {
    let s = CompactionSettings {
        context_window: 1000,
        ..CompactionSettings::default()
    };
    assert_eq!(s.budget(), 600);
    let unknown = CompactionSettings {
        context_window: 0,
        ..s
    };
    assert_eq!(unknown.budget(), u64::MAX);
}

#[tokio::test]
async fn the_skills_tool_loads_saved_skills_with_workspace_data_user_precedence() {
    use amber_tools::skills::{SkillOrigin, SkillsTool, discover_all};
    use amber_tools::{Tool, ToolContext};

    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let write = |root: &std::path::Path, name: &str, body: &str| {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("---\nname: {name}\ndescription: d\n---\n{body}\n");
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
    };
    let workspace = std::fs::canonicalize(ws.path()).unwrap();
    write(
        &workspace.join(".amber/skills"),
        "shared",
        "from the workspace",
    );
    write(user.path(), "shared", "from the user");
    write(user.path(), "saved", "from the user");
    let skill = |name: &str| ExtractedSkill {
        name: name.into(),
        description: "d".into(),
        body: "from compaction".into(),
    };
    let dir = workspace_skills_dir(data.path(), &workspace);
    save_skills(&dir, &[skill("shared"), skill("saved")]).unwrap();

    let found = discover_all(&workspace, Some(&dir), Some(user.path()));
    let origins: Vec<(&str, SkillOrigin)> =
        found.iter().map(|s| (s.name.as_str(), s.origin)).collect();
    assert_eq!(
        origins,
        [
            ("saved", SkillOrigin::DataDir),
            ("shared", SkillOrigin::Workspace)
        ]
    );

    let tool = SkillsTool::with_user_dir(Some(user.path().to_path_buf()))
        .with_data_dir(data.path().to_path_buf());
    let ctx = ToolContext::new(&workspace, "call_1");
    let out = tool
        .call(json!({"action": "load", "name": "saved"}), &ctx)
        .await;
    assert!(out.output.ends_with("from compaction"), "{}", out.output);
    let out = tool
        .call(json!({"action": "load", "name": "shared"}), &ctx)
        .await;
    assert!(out.output.ends_with("from the workspace"), "{}", out.output);
    // Without a data dir the saved skill falls back to the user's.
    let plain = SkillsTool::with_user_dir(Some(user.path().to_path_buf()));
    let out = plain
        .call(json!({"action": "load", "name": "saved"}), &ctx)
        .await;
    assert!(out.output.ends_with("from the user"), "{}", out.output);
    let summary =
        amber_tools::skills::summary_with_data_dir(&workspace, data.path(), None).unwrap();
    assert!(summary.contains("- saved: d"), "{summary}");
}

fn target<'a>(llm: &'a LlmClient, model: &'a str, head: &'a str) -> RequestTarget<'a> {
    RequestTarget {
        requests: llm,
        model,
        head,
    }
}
