//! todowrite: validation errors name the field and index; a valid list
//! replaces the session's todos and is reported through `notify`.

use std::sync::{Arc, Mutex};

use amber_proto::{EventKind, Todo, TodoStatus, ToolStatus};
use serde_json::json;

use super::workspace;
use crate::todowrite::TodoWriteTool;
use crate::{SessionTools, Tool, ToolContext};

/// A context whose session records every notified event.
fn recording() -> (tempfile::TempDir, ToolContext, Arc<Mutex<Vec<EventKind>>>) {
    let (dir, mut ctx) = workspace();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    ctx.session = Arc::new(SessionTools::new(move |kind| {
        sink.lock().unwrap().push(kind);
    }));
    (dir, ctx, seen)
}

fn todo(id: &str, text: &str, status: TodoStatus) -> Todo {
    Todo {
        id: id.to_owned(),
        text: text.to_owned(),
        status,
    }
}

#[tokio::test]
async fn replaces_the_list_notifies_and_renders() {
    let (_dir, ctx, seen) = recording();
    assert!(TodoWriteTool.read_only());
    let out = TodoWriteTool
        .call(
            json!({"todos": [
                {"id": "1", "text": "read the code", "status": "done"},
                {"id": "2", "text": "write the fix", "status": "in_progress"},
                {"id": 3, "text": "run the tests", "status": "pending"}
            ]}),
            &ctx,
        )
        .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(
        out.output,
        "todo list updated (1 done, 1 in progress, 1 pending):\n\
         [x] read the code\n[>] write the fix\n[ ] run the tests"
    );
    let expected = vec![
        todo("1", "read the code", TodoStatus::Done),
        todo("2", "write the fix", TodoStatus::InProgress),
        todo("3", "run the tests", TodoStatus::Pending),
    ];
    assert_eq!(ctx.session.todos(), expected);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![EventKind::TodoUpdated { todos: expected }]
    );

    let out = TodoWriteTool.call(json!({"todos": []}), &ctx).await;
    assert_eq!(out.output, "todo list cleared");
    assert!(ctx.session.todos().is_empty());
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn invalid_lists_are_rejected_naming_the_field() {
    let (_dir, ctx, seen) = recording();
    let cases = [
        (json!({}), "missing required field `todos`"),
        (
            json!({"todos": "x"}),
            "`todos` must be an array, got a string",
        ),
        (json!({"todos": [5]}), "`todos[0]` must be an object"),
        (
            json!({"todos": [{"text": "a", "status": "done"}]}),
            "`todos[0]` is missing `id`",
        ),
        (
            json!({"todos": [{"id": " ", "text": "a", "status": "done"}]}),
            "`todos[0].id` is empty",
        ),
        (
            json!({"todos": [{"id": "1", "text": "", "status": "done"}]}),
            "`todos[0].text` is empty",
        ),
        (
            json!({"todos": [
                {"id": "1", "text": "a", "status": "done"},
                {"id": "1", "text": "b", "status": "pending"}
            ]}),
            "`todos[1].id` `1` is already used by `todos[0]`",
        ),
        (
            json!({"todos": [
                {"id": "1", "text": "a", "status": "done"},
                {"id": "2", "text": "b", "status": "completed"}
            ]}),
            "`todos[1].status` must be one of pending, in_progress, done; got `completed`",
        ),
        (
            json!({"todos": [{"id": "1", "text": "a", "status": 1}]}),
            "`todos[0].status` must be a string",
        ),
        (
            json!({"todos": [{"id": true, "text": "a", "status": "done"}]}),
            "`todos[0].id` must be a string",
        ),
    ];
    for (args, expected) in cases {
        let out = TodoWriteTool.call(args.clone(), &ctx).await;
        assert_eq!(out.status, ToolStatus::Error, "{args}");
        assert!(
            out.output
                .starts_with("invalid arguments for `todowrite`: ")
                && out.output.contains(expected),
            "{args}: {}",
            out.output
        );
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing is reported on errors"
    );
    assert!(ctx.session.todos().is_empty());
}
