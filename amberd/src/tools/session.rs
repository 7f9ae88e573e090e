//! Per-session state that tools may use: the todo list (and, later, background processes).
//!
//! The session owns one `SessionTools`; tool calls reach it through `ToolContext::session`.
//! Changes that clients must see are reported through the `notify` callback the session
//! installs (it publishes them as session events).

use std::sync::{Mutex, MutexGuard};

use amber_proto::{EventKind, Todo};

type Notify = Box<dyn Fn(EventKind) + Send + Sync>;

/// Session-scoped tool state.
pub struct SessionTools {
    todos: Mutex<Vec<Todo>>,
    notify: Notify,
}

impl std::fmt::Debug for SessionTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTools")
            .field("todos", &self.lock_todos().len())
            .finish_non_exhaustive()
    }
}

impl SessionTools {
    pub fn new(notify: impl Fn(EventKind) + Send + Sync + 'static) -> Self {
        Self {
            todos: Mutex::new(Vec::new()),
            notify: Box::new(notify),
        }
    }

    /// State that reports to nobody (tests, in-process use).
    pub fn detached() -> Self {
        Self::new(|_| {})
    }

    fn lock_todos(&self) -> MutexGuard<'_, Vec<Todo>> {
        self.todos.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn todos(&self) -> Vec<Todo> {
        self.lock_todos().clone()
    }

    /// Replaces the todo list and reports `todo_updated`.
    pub fn set_todos(&self, todos: Vec<Todo>) {
        *self.lock_todos() = todos.clone();
        (self.notify)(EventKind::TodoUpdated { todos });
    }
}
