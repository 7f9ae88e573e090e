//! The system prompt and prompt assembly.
//!
//! Assembly happens after the compression gate, on a copy: head blocks (the system prompt)
//! and tail blocks (mode reminders) wrap the context's messages and are never pushed into
//! the context itself.

use std::path::Path;

use amber_proto::{Message, Mode, Role};

/// The user message of the silent confirm turn.
pub const CONFIRM_PROMPT: &str = "Are you finished with the task? If it is complete, reply with \
exactly DONE and nothing else. If anything is left to do, continue working with your tools.";

/// The built-in system prompt, with the facts of this workspace and its skills.
pub fn default_system_prompt(workspace: &Path, data_dir: &Path) -> String {
    let mut prompt = base_prompt(workspace);
    if let Some(skills) = crate::tools::skills::summary_with_data_dir(workspace, data_dir) {
        prompt.push_str("\n\n");
        prompt.push_str(&skills);
    }
    prompt
}

fn base_prompt(workspace: &Path) -> String {
    format!(
        "You are amber, a coding agent working in the directory {ws}.\n\
         Use the tools to inspect and change files and to run commands; do not guess file \
         contents. Paths are relative to {ws} unless absolute, and every path must stay \
         inside it. Prefer small, verifiable steps: read before you edit, run the tests \
         after you change code. When the task is done, reply with a short summary of what \
         you did.",
        ws = workspace.display()
    )
}

/// The messages sent to the model: the context, plus a tail reminder in read mode.
pub fn assemble(context: Vec<Message>, mode: Mode) -> Vec<Message> {
    let mut messages = context;
    if mode == Mode::Read {
        messages.push(Message {
            role: Role::System,
            content: "Reminder: this session is in read mode. Only read-only tools work: \
                      reading and searching files, and shell commands that only read (ls, \
                      cat, grep, git status …). Changing files and commands that write or \
                      are not known to be read-only are denied."
                .to_owned(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        });
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_mode_reminder_says_read_only_commands_still_run() {
        assert_eq!(assemble(Vec::new(), Mode::Write).len(), 0);
        let messages = assemble(Vec::new(), Mode::Read);
        let [reminder] = messages.as_slice() else {
            panic!("one reminder expected: {messages:?}");
        };
        assert_eq!(reminder.role, Role::System);
        assert!(reminder.content.contains("shell commands that only read"));
        assert!(!reminder.content.contains("run commands are denied"));
    }
}
