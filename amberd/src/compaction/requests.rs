//! Steps 2 and 3: the classify and extract requests.
//!
//! Both requests share one content-identical prefix — the session's request head (the
//! system message every request of the session starts with, so even the classify request
//! reuses the provider's cached head), the job description with the numbered transcript as
//! one user message, and the classify question — so the extract request extends the
//! classify request's KV cache on the provider. `extract_messages` builds the extract
//! request by appending to the classify messages, never by rebuilding them.

use std::collections::HashMap;

use amber_proto::{Message, Role};

/// Per-message clip lengths tried, largest first, until the transcript fits its share.
const CLIP_STEPS: &[usize] = &[4000, 2000, 1000, 500, 250, 120];
/// Share of the context window the transcript may take.
const TRANSCRIPT_SHARE: f64 = 0.5;
/// Bytes per token, as in the estimate.
const BYTES_PER_TOKEN: f64 = 4.0;
/// Longest rendering of one tool call's arguments.
const CLIP_ARGUMENTS: usize = 200;

const JOB: &str = "Stop working on the task for this exchange: your job now is to compact the \
conversation history of this session so that it fits the context window. You receive the \
transcript of the conversation so far, one entry per message, each tagged `[id N]`. The system \
prompt above is always kept and is not in the transcript. Long entries are clipped in the \
transcript only. You answer exactly the questions asked, in the JSON shape asked for, and \
nothing else.";

const CLASSIFY: &str = "Classify every message of the transcript by its id:\n\
- \"core\": must be kept word for word: the user's requests, instructions and constraints, \
decisions made, and facts or results the agent still needs to continue the current task.\n\
- \"context\": useful background that may be dropped when space is short (older exploration, \
outputs whose gist is known).\n\
- \"prune\": no longer useful: superseded or repeated outputs, failed attempts that were \
resolved, chatter, information repeated elsewhere.\n\
An assistant message with tool calls and the tool results answering it are kept or dropped \
together. Reply with only this JSON object:\n\
{\"classification\": [{\"id\": 1, \"class\": \"core\"}, {\"id\": 2, \"class\": \"prune\"}]}";

const EXTRACT: &str = "Now extract what must survive once the \"context\" and \"prune\" \
messages are gone.\n\
- \"memories\": short, self-contained facts worth remembering for the rest of this session: \
the task and its current state, the user's preferences and constraints, decisions and their \
reasons, relevant file paths and what they hold, commands that work, open problems. Do not \
repeat what the \"core\" messages already say word for word.\n\
- \"skills\": reusable procedures learned here that would help future sessions in this \
workspace (how to build, test or release, a project convention, a fix for a recurring \
problem). Usually there are none; only include a skill that is clearly reusable. Each has a \
short kebab-case \"name\", a one-line \"description\" of when to use it, and a Markdown \
\"body\" with the steps.\n\
Reply with only this JSON object:\n\
{\"memories\": [\"…\"], \"skills\": [{\"name\": \"…\", \"description\": \"…\", \"body\": \"…\"}]}";

/// The classify request's messages for `messages` (the collapsed context, `[0]` being
/// the system prompt; message `i` gets id `i`), after the session's `head`.
pub(crate) fn classify_messages(
    head: &str,
    messages: &[Message],
    context_window: u64,
) -> Vec<Message> {
    vec![
        Message::system(head),
        Message::user(format!("{JOB}\n\n{}", transcript(messages, context_window))),
        Message::user(CLASSIFY),
    ]
}

/// The extract request: the classify request verbatim, its answer, the extract question.
pub(crate) fn extract_messages(classify: &[Message], classify_answer: &str) -> Vec<Message> {
    let mut messages = classify.to_vec();
    messages.push(Message::assistant(classify_answer, Vec::new()));
    messages.push(Message::user(EXTRACT));
    messages
}

/// The numbered transcript, clipped to fit its share of the window.
pub(crate) fn transcript(messages: &[Message], context_window: u64) -> String {
    let budget = if context_window == 0 {
        usize::MAX
    } else {
        (context_window as f64 * TRANSCRIPT_SHARE * BYTES_PER_TOKEN) as usize
    };
    let mut rendered = String::new();
    for &clip in CLIP_STEPS {
        rendered = render(messages, clip);
        if rendered.len() <= budget {
            break;
        }
    }
    rendered
}

fn render(messages: &[Message], clip: usize) -> String {
    let mut tool_names: HashMap<&str, &str> = HashMap::new();
    let mut out = String::from("Transcript:\n");
    for (id, message) in messages.iter().enumerate().skip(1) {
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        out.push_str(&format!("\n[id {id}] {role}"));
        if let Some(call_id) = message.tool_call_id.as_deref() {
            match tool_names.get(call_id) {
                Some(name) => out.push_str(&format!(" ({name} result)")),
                None => out.push_str(" (result)"),
            }
        }
        out.push_str(": ");
        out.push_str(&clip_middle(&message.content, clip));
        for call in &message.tool_calls {
            tool_names.insert(call.id.as_str(), call.name.as_str());
            out.push_str(&format!(
                "\n  -> call {}({})",
                call.name,
                clip_middle(call.arguments.trim(), CLIP_ARGUMENTS.min(clip))
            ));
        }
        out.push('\n');
    }
    out
}

/// `text` if at most `max` bytes, else its head and tail around a marker.
pub(crate) fn clip_middle(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head = text.floor_char_boundary(max * 2 / 3);
    let tail = text.ceil_char_boundary(text.len() - max / 3);
    format!(
        "{} … [{} bytes clipped] … {}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolCall;

    fn sample() -> Vec<Message> {
        vec![
            Message::system("the system prompt"),
            Message::user("fix the bug"),
            Message::assistant(
                "Looking.",
                vec![ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: r#"{"path":"src/a.rs"}"#.into(),
                }],
            ),
            Message::tool("c1", "é".repeat(3000)),
        ]
    }

    #[test]
    fn transcript_numbers_messages_and_skips_the_system_prompt() {
        let text = transcript(&sample(), 0);
        assert!(!text.contains("the system prompt"));
        assert!(text.contains("[id 1] user: fix the bug"));
        assert!(
            text.contains("[id 2] assistant: Looking.\n  -> call read({\"path\":\"src/a.rs\"})")
        );
        assert!(text.contains("[id 3] tool (read result): "));
        assert!(text.contains("bytes clipped"));
    }

    #[test]
    fn transcript_shrinks_to_fit_a_small_window() {
        let mut messages = sample();
        for _ in 0..50 {
            messages.push(Message::user("z".repeat(5000)));
        }
        let roomy = transcript(&messages, 0);
        let tight = transcript(&messages, 4000);
        assert!(
            tight.len() < roomy.len() / 4,
            "{} vs {}",
            tight.len(),
            roomy.len()
        );
        assert!(tight.contains("[id 53] user"));
    }

    #[test]
    fn extract_request_extends_the_classify_request() {
        let classify = classify_messages("the head", &sample(), 1000);
        assert_eq!(classify[0], Message::system("the head"));
        assert!(classify[1].content.contains("[id 1] user: fix the bug"));
        let extract = extract_messages(&classify, "{\"classification\":[]}");
        assert_eq!(&extract[..classify.len()], &classify[..]);
        assert_eq!(extract.len(), classify.len() + 2);
        assert_eq!(extract[3].role, Role::Assistant);
        assert_eq!(extract[4].role, Role::User);
    }

    #[test]
    fn clipping_respects_char_boundaries() {
        let clipped = clip_middle(&"é".repeat(100), 11);
        assert!(clipped.contains("bytes clipped"));
        assert_eq!(clip_middle("short", 10), "short");
    }
}
