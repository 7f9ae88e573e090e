//! Assembly on a copy: the head replaces the system prompt, the tail's role and place.

use amber_proto::{Message, Mode, Role, Todo, TodoStatus};

use super::tail::READ_MODE;
use super::{SYSTEM_PROMPT, Tail, assemble, default_system_prompt};

fn tail(mode: Mode) -> Tail<'static> {
    Tail {
        todos: &[],
        mode,
        steers: &[],
        output_instruction: None,
        hook_context: None,
    }
}

#[test]
fn the_head_replaces_the_system_prompt_and_the_tail_joins_the_last_user_message() {
    let context = vec![Message::system("sys"), Message::user("fix it")];
    let sent = assemble(context, "sys\n\nblocks", &tail(Mode::Write));
    assert_eq!(sent.len(), 2);
    assert_eq!(
        (sent[0].role, sent[0].content.as_str()),
        (Role::System, "sys\n\nblocks")
    );
    assert_eq!(sent[1].role, Role::User);
    let user = &sent[1].content;
    assert!(user.starts_with("fix it\n\n<system-reminder>\n"), "{user}");
    assert!(user.ends_with("</system-reminder>"), "{user}");
    assert!(user.contains("write mode"), "{user}");
}

#[test]
fn after_a_tool_result_the_tail_is_a_user_message_of_its_own() {
    let context = vec![
        Message::system("sys"),
        Message::user("go"),
        Message::tool("c1", "{}"),
    ];
    let sent = assemble(context, "head", &tail(Mode::Write));
    assert_eq!(sent.len(), 4);
    let last = &sent[3];
    assert_eq!(last.role, Role::User);
    assert!(
        last.content.starts_with("<system-reminder>"),
        "{}",
        last.content
    );
    assert_eq!(
        sent[1].content, "go",
        "only the last message carries the tail"
    );
}

#[test]
fn the_read_mode_reminder_says_read_only_commands_still_run() {
    let sent = assemble(vec![Message::user("x")], "head", &tail(Mode::Read));
    assert_eq!(
        sent[0].role,
        Role::System,
        "a head is put first when missing"
    );
    assert!(sent[1].content.contains(READ_MODE));
    assert!(READ_MODE.contains("shell commands that only read"));
    assert!(!sent[1].content.contains("run commands are denied"));
}

#[test]
fn the_tail_lists_todos_with_their_status_and_restates_steers() {
    let todos = [
        Todo {
            id: "1".into(),
            text: "write the parser".into(),
            status: TodoStatus::Done,
        },
        Todo {
            id: "2".into(),
            text: "test it".into(),
            status: TodoStatus::InProgress,
        },
    ];
    let steers = ["You repeated yourself.".to_owned()];
    let text = Tail {
        todos: &todos,
        mode: Mode::Write,
        steers: &steers,
        output_instruction: Some("Answer in JSON."),
        hook_context: Some("ticket ABC-1 is in progress"),
    }
    .render();
    assert!(
        text.contains(
            "Context from the user's hooks for this prompt:\nticket ABC-1 is in progress\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("[x] write the parser (1)\n[~] test it (2)"),
        "{text}"
    );
    assert!(text.contains("- You repeated yourself."), "{text}");
    assert!(
        text.ends_with("\nAnswer in JSON.\n</system-reminder>"),
        "{text}"
    );
    let empty = tail(Mode::Write).render();
    assert!(!empty.contains("todo"), "{empty}");
}

#[test]
fn the_built_in_prompt_covers_the_tools_and_stays_short() {
    let prompt = default_system_prompt();
    assert!(SYSTEM_PROMPT.len() < 6000, "{} chars", SYSTEM_PROMPT.len());
    for needle in [
        "`read`",
        "`search`",
        "`edit`",
        "edits:",
        "`apply_patch`",
        "`write`",
        "`bash`",
        "`process`",
        "`todowrite`",
        "`task`",
        "`skills`",
        "`fetch`",
        "summary",
    ] {
        assert!(prompt.contains(needle), "{needle} missing");
    }
    assert!(!prompt.ends_with('\n'));
}

#[test]
fn a_head_joins_its_parts_with_one_blank_line() {
    assert_eq!(super::head::join("sys", ""), "sys");
    assert_eq!(super::head::join("", "env"), "env");
    assert_eq!(super::head::join("sys", "env"), "sys\n\nenv");
}
