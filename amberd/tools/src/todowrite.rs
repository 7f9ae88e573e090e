//! The `todowrite` tool: replaces the session's todo list (the agent's own
//! plan) and reports `todo_updated`. Read-only: it touches no files, so read
//! mode allows it.

use amber_proto::{Todo, TodoStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::{Args, describe};
use super::{Tool, ToolContext, ToolOutcome};

/// Longest list accepted.
pub(crate) const MAX_TODOS: usize = 200;

pub(crate) struct TodoWriteTool;

impl Tool for TodoWriteTool {
    fn name(&self) -> &str {
        "todowrite"
    }

    fn description(&self) -> &str {
        "Replace your todo list for this session with `todos` (the whole list every time). \
         Use it to plan multi-step work and to show progress: mark exactly the item you are \
         working on `in_progress`, and items `done` as soon as they are finished. Each item \
         needs a unique `id`, a `text` and a `status` (pending, in_progress or done). \
         An empty list clears it."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete new todo list",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "Unique, stable id of the item"},
                            "text": {"type": "string", "description": "What to do"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                        },
                        "required": ["id", "text", "status"]
                    }
                }
            },
            "required": ["todos"]
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match parse(&args) {
                Ok(todos) => {
                    let rendered = render(&todos);
                    ctx.session.set_todos(todos);
                    ToolOutcome::ok(rendered)
                }
                Err(outcome) => outcome,
            }
        })
    }
}

fn invalid(message: String) -> ToolOutcome {
    ToolOutcome::error(format!("invalid arguments for `todowrite`: {message}"))
}

/// Validate the arguments into a todo list.
pub(crate) fn parse(args: &Value) -> Result<Vec<Todo>, ToolOutcome> {
    Args::new("todowrite", args)?;
    let Some(value) = args.get("todos").filter(|v| !v.is_null()) else {
        return Err(invalid("missing required field `todos`".to_owned()));
    };
    let Value::Array(items) = value else {
        return Err(invalid(format!(
            "field `todos` must be an array, got {}",
            describe(value)
        )));
    };
    if items.len() > MAX_TODOS {
        return Err(invalid(format!(
            "`todos` has {} items; at most {MAX_TODOS} are allowed",
            items.len()
        )));
    }
    let mut todos: Vec<Todo> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let todo = parse_item(index, item)?;
        if let Some(first) = todos.iter().position(|t| t.id == todo.id) {
            return Err(invalid(format!(
                "`todos[{index}].id` `{}` is already used by `todos[{first}]`; ids must be unique",
                todo.id
            )));
        }
        todos.push(todo);
    }
    Ok(todos)
}

fn parse_item(index: usize, item: &Value) -> Result<Todo, ToolOutcome> {
    let Value::Object(map) = item else {
        return Err(invalid(format!(
            "`todos[{index}]` must be an object with `id`, `text` and `status`, got {}",
            describe(item)
        )));
    };
    let field = |name: &str| map.get(name).filter(|v| !v.is_null());
    let missing = |name: &str| invalid(format!("`todos[{index}]` is missing `{name}`"));
    let id = match field("id").ok_or_else(|| missing("id"))? {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(invalid(format!(
                "`todos[{index}].id` must be a string, got {}",
                describe(other)
            )));
        }
    };
    if id.is_empty() {
        return Err(invalid(format!("`todos[{index}].id` is empty")));
    }
    let text = match field("text").ok_or_else(|| missing("text"))? {
        Value::String(s) => s.trim().to_owned(),
        other => {
            return Err(invalid(format!(
                "`todos[{index}].text` must be a string, got {}",
                describe(other)
            )));
        }
    };
    if text.is_empty() {
        return Err(invalid(format!("`todos[{index}].text` is empty")));
    }
    let status = match field("status").ok_or_else(|| missing("status"))? {
        Value::String(s) => match s.as_str() {
            "pending" => TodoStatus::Pending,
            "in_progress" => TodoStatus::InProgress,
            "done" => TodoStatus::Done,
            other => {
                return Err(invalid(format!(
                    "`todos[{index}].status` must be one of pending, in_progress, done; got `{other}`"
                )));
            }
        },
        other => {
            return Err(invalid(format!(
                "`todos[{index}].status` must be a string (pending, in_progress or done), got {}",
                describe(other)
            )));
        }
    };
    Ok(Todo { id, text, status })
}

/// `[x] done`, `[>] in progress`, `[ ] pending`, one per line, with a count.
pub(crate) fn render(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "todo list cleared".to_owned();
    }
    let count = |status| todos.iter().filter(|t| t.status == status).count();
    let mut out = format!(
        "todo list updated ({} done, {} in progress, {} pending):",
        count(TodoStatus::Done),
        count(TodoStatus::InProgress),
        count(TodoStatus::Pending)
    );
    for todo in todos {
        let mark = match todo.status {
            TodoStatus::Done => "[x]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Pending => "[ ]",
        };
        out.push('\n');
        out.push_str(mark);
        out.push(' ');
        out.push_str(&todo.text.replace('\n', " "));
    }
    out
}
