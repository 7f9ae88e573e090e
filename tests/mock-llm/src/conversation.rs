//! Stateless scripts: a [`Conversation`] is answered from the request alone, so any number of
//! concurrent sessions can share one endpoint. The last user message holding a conversation's
//! prompt names it, and the model's answers since then count the turns already given
//! ([`choose_chat`], [`choose_responses`]). Every turn is rendered once, at start
//! ([`Conversations`]), so answering costs no rendering.

use serde_json::Value;

use crate::ctx::Ctx;
use crate::reply::Reply;
use crate::turn::MockTurn;
use crate::{chat, fault, messages, responses};

/// The confirm prompt of amberd's silent confirm turn starts with this
/// (amberd/src/agent/prompt/mod.rs); it is answered `DONE`.
pub(crate) const CONFIRM_PREFIX: &str = "Are you finished with the task?";

/// One scripted conversation: its prompt, and the model's turns in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// Names it in [`RecordedRequest::conversation`](crate::RecordedRequest::conversation).
    pub name: String,
    /// Found in a user message, it names the conversation (no prompt may contain another's).
    pub prompt: String,
    /// The answers, in order; once they are used up, the conversation is answered `Done.`.
    pub turns: Vec<MockTurn>,
}

/// Which answer a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Turn `step` of conversation `conversation`.
    Turn { conversation: usize, step: usize },
    /// The conversation's turns are used up: a closing text.
    Finished { conversation: usize },
    /// amberd's confirm prompt: `DONE`.
    Confirm,
    /// No conversation's prompt is in the request.
    Unknown,
}

/// The text of a message's (or input item's) `content`: a string, or its text parts.
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The choice once the conversation is known: turn `step`, or finished after `turns`.
fn at_step(conversation: usize, step: usize, turns: usize) -> Choice {
    if step < turns {
        Choice::Turn { conversation, step }
    } else {
        Choice::Finished { conversation }
    }
}

/// A chat-completions request's choice: the assistant messages after the last user message
/// naming a conversation count its turns. `conversations` gives each one's prompt and turn
/// count.
pub(crate) fn choose_chat(body: &Value, conversations: &[(String, usize)]) -> Choice {
    let Some(messages) = body["messages"].as_array() else {
        return Choice::Unknown;
    };
    if let Some(last) = messages.last()
        && last["role"] == "user"
        && text_of(last).starts_with(CONFIRM_PREFIX)
    {
        return Choice::Confirm;
    }
    for (at, message) in messages.iter().enumerate().rev() {
        if message["role"] != "user" {
            continue;
        }
        let text = text_of(message);
        let Some(conversation) = conversations
            .iter()
            .position(|(p, _)| text.contains(p.as_str()))
        else {
            continue;
        };
        let step = messages[at + 1..]
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        return at_step(conversation, step, conversations[conversation].1);
    }
    Choice::Unknown
}

/// Whether a Responses API input item was produced by the model (a reply, a call, reasoning).
fn from_model(item: &Value) -> bool {
    matches!(
        item["type"].as_str(),
        Some("function_call" | "reasoning" | "custom_tool_call" | "local_shell_call")
    ) || item["role"] == "assistant"
}

/// A Responses API request's choice: like [`choose_chat`] over the `input` items, a run of
/// consecutive model items being one answer.
pub(crate) fn choose_responses(body: &Value, conversations: &[(String, usize)]) -> Choice {
    let Some(items) = body["input"].as_array() else {
        return Choice::Unknown;
    };
    // amberd's confirm turn, as over chat completions (its `openai-responses` dialect).
    if let Some(last) = items.last()
        && last["role"] == "user"
        && text_of(last).starts_with(CONFIRM_PREFIX)
    {
        return Choice::Confirm;
    }
    for (at, item) in items.iter().enumerate().rev() {
        if item["role"] != "user" {
            continue;
        }
        let text = text_of(item);
        let Some(conversation) = conversations
            .iter()
            .position(|(p, _)| text.contains(p.as_str()))
        else {
            continue;
        };
        let mut step = 0;
        let mut in_answer = false;
        for later in &items[at + 1..] {
            let model = from_model(later);
            if model && !in_answer {
                step += 1;
            }
            in_answer = model;
        }
        return at_step(conversation, step, conversations[conversation].1);
    }
    Choice::Unknown
}

/// One answer rendered for both APIs, streamed and whole.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The turn's own wait (its `Delay`s); `None`: the server's default.
    pub delay: Option<std::time::Duration>,
    chat: [Reply; 2],
    responses: [Reply; 2],
    messages: [Reply; 2],
}

impl Answer {
    fn render(turn: &MockTurn, ctx: &Ctx) -> Answer {
        Answer {
            delay: turn.split_delay().0,
            chat: [false, true].map(|stream| fault::apply(turn, chat::render(turn, ctx, stream))),
            responses: [false, true]
                .map(|stream| fault::apply(turn, responses::render(turn, ctx, stream))),
            messages: [false, true]
                .map(|stream| fault::apply(turn, messages::render(turn, ctx, stream))),
        }
    }

    /// The reply for a request of `api`, streamed or not.
    pub(crate) fn reply(&self, api: Api, stream: bool) -> &Reply {
        let replies = match api {
            Api::ChatCompletions => &self.chat,
            Api::Responses => &self.responses,
            Api::Messages => &self.messages,
        };
        &replies[usize::from(stream)]
    }
}

/// The wire APIs served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    ChatCompletions,
    Responses,
    /// Anthropic's Messages API.
    Messages,
}

/// Every conversation, pre-rendered.
#[derive(Debug)]
pub(crate) struct Conversations {
    names: Vec<String>,
    /// Prompt and turn count of each conversation.
    prompts: Vec<(String, usize)>,
    turns: Vec<Vec<Answer>>,
    confirm: Answer,
    finished: Answer,
    unknown: Answer,
}

impl Conversations {
    /// Renders every turn of `conversations`, `model` in every chunk.
    pub(crate) fn render(conversations: Vec<Conversation>, model: &str) -> Conversations {
        let text = |t: &str| Answer::render(&MockTurn::text(t), &Ctx::for_step(0, model));
        Conversations {
            names: conversations.iter().map(|c| c.name.clone()).collect(),
            prompts: conversations
                .iter()
                .map(|c| (c.prompt.clone(), c.turns.len()))
                .collect(),
            turns: conversations
                .iter()
                .map(|c| {
                    c.turns
                        .iter()
                        .enumerate()
                        .map(|(step, turn)| Answer::render(turn, &Ctx::for_step(step, model)))
                        .collect()
                })
                .collect(),
            confirm: text("DONE"),
            finished: text("Done."),
            unknown: text("mock llm: no conversation's prompt is in this request."),
        }
    }

    /// The answer to a request of `api` and the name of the conversation it belongs to (`None`
    /// for the confirm prompt and an unknown conversation).
    pub(crate) fn answer(&self, api: Api, body: &Value) -> (&Answer, Option<&str>) {
        let choice = match api {
            // Its `messages` read as chat's do: tool results are user messages without
            // text, and the model's turns are `assistant` messages.
            Api::ChatCompletions | Api::Messages => choose_chat(body, &self.prompts),
            Api::Responses => choose_responses(body, &self.prompts),
        };
        match choice {
            Choice::Turn { conversation, step } => (
                &self.turns[conversation][step],
                Some(&self.names[conversation]),
            ),
            Choice::Finished { conversation } => (&self.finished, Some(&self.names[conversation])),
            Choice::Confirm => (&self.confirm, None),
            Choice::Unknown => (&self.unknown, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conversations(list: &[(&str, usize)]) -> Vec<(String, usize)> {
        list.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect()
    }

    fn chat(messages: Value) -> Value {
        json!({"model": "m", "stream": true, "messages": messages})
    }

    #[test]
    fn chat_choice_counts_assistant_turns_after_the_prompt() {
        let list = conversations(&[("first task", 2), ("second task", 1)]);
        let start = chat(json!([
            {"role": "system", "content": "you are amber"},
            {"role": "user", "content": "first task"},
        ]));
        assert_eq!(
            choose_chat(&start, &list),
            Choice::Turn {
                conversation: 0,
                step: 0
            }
        );
        let after_tool = chat(json!([
            {"role": "user", "content": [{"type": "text", "text": "please: second task"}]},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "tool", "content": "hello"},
        ]));
        assert_eq!(
            choose_chat(&after_tool, &list),
            Choice::Finished { conversation: 1 }
        );
        let confirm = chat(json!([
            {"role": "user", "content": "first task"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": format!("{CONFIRM_PREFIX} If it is complete…")},
        ]));
        assert_eq!(choose_chat(&confirm, &list), Choice::Confirm);
        let unknown = chat(json!([{"role": "user", "content": "hi"}]));
        assert_eq!(choose_chat(&unknown, &list), Choice::Unknown);
        assert_eq!(choose_chat(&json!({}), &list), Choice::Unknown);
    }

    #[test]
    fn responses_choice_counts_runs_of_model_items() {
        let list = conversations(&[("the task", 2)]);
        let start = json!({"input": [
            {"type": "message", "role": "developer", "content": "rules"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/> the task"}]},
        ]});
        assert_eq!(
            choose_responses(&start, &list),
            Choice::Turn {
                conversation: 0,
                step: 0
            }
        );
        let after_calls = json!({"input": [
            {"role": "user", "content": "the task"},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "a", "name": "bash", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "x"},
            {"type": "function_call_output", "call_id": "b", "output": "y"},
        ]});
        assert_eq!(
            choose_responses(&after_calls, &list),
            Choice::Turn {
                conversation: 0,
                step: 1
            }
        );
        assert_eq!(
            choose_responses(&json!({"input": "hi"}), &list),
            Choice::Unknown
        );
        // amberd's confirm prompt, as its Responses dialect sends it.
        let confirm = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "the task"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": format!("{CONFIRM_PREFIX} If it is complete…")}]},
        ]});
        assert_eq!(choose_responses(&confirm, &list), Choice::Confirm);
    }

    #[test]
    fn answers_are_rendered_per_step_and_named() {
        let all = Conversations::render(
            vec![Conversation {
                name: "two".into(),
                prompt: "do two things".into(),
                turns: vec![
                    MockTurn::Delay {
                        ms: 3,
                        then: Box::new(MockTurn::tool_call("bash", &json!({"command": "ls"}))),
                    },
                    MockTurn::text("ok"),
                ],
            }],
            "m",
        );
        let first = chat(json!([{"role": "user", "content": "do two things"}]));
        let (answer, name) = all.answer(Api::ChatCompletions, &first);
        assert_eq!(name, Some("two"));
        assert_eq!(answer.delay, Some(std::time::Duration::from_millis(3)));
        let (answer, name) = all.answer(Api::ChatCompletions, &chat(json!([])));
        assert_eq!((name, answer.delay), (None, None));
    }

    #[test]
    fn messages_requests_count_assistant_turns_past_their_tool_results() {
        let list = conversations(&[("the task", 2)]);
        // Anthropic's shape: system apart, text blocks, tool results as user messages.
        let after_call = json!({"system": [{"type": "text", "text": "rules"}], "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<env/> the task"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "tool_use", "id": "a", "name": "bash", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "the task is done"},
                {"type": "text", "text": "<system-reminder>mode</system-reminder>"}]},
        ]});
        assert_eq!(
            choose_chat(&after_call, &list),
            Choice::Turn {
                conversation: 0,
                step: 1
            }
        );
        let confirm = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "the task"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": [{"type": "text", "text": format!("{CONFIRM_PREFIX} …")}]},
        ]});
        assert_eq!(choose_chat(&confirm, &list), Choice::Confirm);
    }
}
