//! The system prompt and prompt assembly (DESIGN.md "prompt assembly").
//!
//! Assembly happens after the compression gate, on a copy: the copy sent to the model is
//! the head (the context's system prompt, then the environment block, the project
//! instructions and the skills summary — `head.rs`), the context's other messages, and the
//! tail (`tail.rs`: the todo list, the mode reminder, this turn's steers).
//!
//! **Invariants:** head and tail are never pushed into the context (`session/get` and the
//! store show the context as it is); the head is byte-identical across the turns and
//! requests of a session until the instructions or skills change, so provider prompt
//! caches stay warm — everything that changes per turn is in the tail.

mod head;
mod tail;

use amber_proto::{Message, Role};

pub(crate) use head::PromptHead;
pub(crate) use tail::Tail;

/// The user message of the silent confirm turn.
pub(crate) const CONFIRM_PROMPT: &str = "Are you finished with the task? If it is complete, reply with \
exactly DONE and nothing else. If anything is left to do, continue working with your tools.";

/// The built-in system prompt (`[agent] system_prompt` and `session/new {systemPrompt}`
/// replace it; the head blocks follow either).
pub(crate) const SYSTEM_PROMPT: &str = include_str!("system_prompt.md");

/// The built-in system prompt, without the trailing newline of its file.
pub(crate) fn default_system_prompt() -> String {
    SYSTEM_PROMPT.trim_end().to_owned()
}

/// The messages sent to the model: `context` with its system prompt replaced by `head`
/// (which starts with it), and `tail` after the last message.
pub(crate) fn assemble(context: Vec<Message>, head: &str, tail: &Tail<'_>) -> Vec<Message> {
    let mut messages = context;
    match messages.first_mut() {
        Some(first) if first.role == Role::System => first.content = head.to_owned(),
        _ => messages.insert(0, Message::system(head)),
    }
    tail::append(&mut messages, &tail.render());
    messages
}

#[cfg(test)]
mod tests;
