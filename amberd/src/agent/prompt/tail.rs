//! The tail of the prompt: what changes from turn to turn, after the context's last message
//! on the copy sent to the model — the todo list when it is not empty, a one-line reminder
//! of the session's mode, the steers of this turn restated, and the turn's output schema
//! when its provider takes no `response_format` (`agent/output_schema.rs`).
//!
//! Its role: one `user`-role block wrapped in `<system-reminder>…</system-reminder>`,
//! appended to the last message when that is a user message, else a message of its own.
//! Many OpenAI-compatible servers' chat templates reject a `system` message that is not
//! first, and some reject two `user` messages in a row; a user block after a tool result or
//! an assistant message is accepted by all of them.

use amber_proto::{Message, Mode, Role, Todo, TodoStatus};

/// The read mode reminder, word for word as before the tail existed.
pub(crate) const READ_MODE: &str = "Reminder: this session is in read mode. Only read-only \
tools work: reading and searching files, and shell commands that only read (ls, cat, grep, \
git status …). Changing files and commands that write or are not known to be read-only are \
denied.";
const WRITE_MODE: &str = "Reminder: this session is in write mode. You may change files in \
the workspace and run commands; actions the policy finds risky ask the user for approval.";
const YOLO_MODE: &str = "Reminder: this session is in yolo mode. Tools run without asking \
the user; paths must still stay inside the workspace, so take extra care with destructive \
actions.";

/// What the tail of one request says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tail<'a> {
    pub todos: &'a [Todo],
    pub mode: Mode,
    /// The guards' notes to the model during this turn, oldest first.
    pub steers: &'a [String],
    /// The output schema as an instruction (providers without structured output).
    pub output_instruction: Option<&'a str>,
    /// What the user's `user_prompt` hooks add to this turn (`additionalContext`).
    pub hook_context: Option<&'a str>,
}

impl Tail<'_> {
    /// The `<system-reminder>` block.
    pub(crate) fn render(&self) -> String {
        let mut out = String::from("<system-reminder>\n");
        if !self.todos.is_empty() {
            out.push_str("Your todo list (update it with todowrite):\n");
            for todo in self.todos {
                let mark = match todo.status {
                    TodoStatus::Pending => "[ ]",
                    TodoStatus::InProgress => "[~]",
                    TodoStatus::Done => "[x]",
                };
                out.push_str(&format!("{mark} {} ({})\n", todo.text, todo.id));
            }
            out.push('\n');
        }
        out.push_str(match self.mode {
            Mode::Read => READ_MODE,
            Mode::Write => WRITE_MODE,
            Mode::Yolo => YOLO_MODE,
        });
        out.push('\n');
        if let Some(context) = self.hook_context {
            out.push_str("\nContext from the user's hooks for this prompt:\n");
            out.push_str(context.trim_end());
            out.push('\n');
        }
        if !self.steers.is_empty() {
            out.push_str("\nNotes from amber during this turn:\n");
            for steer in self.steers {
                out.push_str(&format!("- {steer}\n"));
            }
        }
        if let Some(instruction) = self.output_instruction {
            out.push('\n');
            out.push_str(instruction);
            out.push('\n');
        }
        out.push_str("</system-reminder>");
        out
    }
}

/// Puts `block` after the last message: appended to it when it is a user message (on the
/// copy, never the context), else as a user message of its own.
pub(crate) fn append(messages: &mut Vec<Message>, block: &str) {
    match messages.last_mut() {
        Some(last) if last.role == Role::User => {
            last.content.push_str("\n\n");
            last.content.push_str(block);
        }
        _ => messages.push(Message::user(block)),
    }
}
