//! What a renderer needs to know about the answer it draws ([`Ctx`]): ids, model, token
//! counts. Built per request for a script, once per turn for a [`Conversation`].
//!
//! [`Conversation`]: crate::Conversation

/// Prompt tokens a pre-rendered answer reports: small and fixed, because large ones would make
/// amberd's compaction gate think the context is full.
const FIXED_PROMPT_TOKENS: u64 = 100;

/// The answer's identity and sizes.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// `id` of a chat completion.
    pub chat_id: String,
    /// `id` of a Responses API response.
    pub response_id: String,
    /// `model` of every chunk.
    pub model: String,
    pub prompt_tokens: u64,
    /// Makes generated tool-call and item ids unique: the request's number, or the turn's step
    /// (ids unique within a conversation).
    pub seq: usize,
    /// Size, in chars, of the pieces tool-call arguments are streamed in.
    pub argument_piece_chars: usize,
}

impl Ctx {
    /// For request number `n` (1-based) of a script: its model, a prompt size of a quarter
    /// of its body's bytes, arguments in pieces of 8 chars.
    pub(crate) fn for_request(n: usize, model: &str, body_bytes: usize) -> Ctx {
        Ctx {
            chat_id: format!("chatcmpl-mock-{n}"),
            response_id: format!("resp_mock_{n}"),
            model: model.to_owned(),
            prompt_tokens: (body_bytes as u64).div_ceil(4).max(1),
            seq: n,
            argument_piece_chars: 8,
        }
    }

    /// For step `step` (0-based) of a conversation, rendered before any request: fixed ids
    /// and prompt size, arguments in pieces of 16 chars, as providers stream them.
    pub(crate) fn for_step(step: usize, model: &str) -> Ctx {
        Ctx {
            chat_id: "chatcmpl-mock".to_owned(),
            response_id: "resp_mock".to_owned(),
            model: model.to_owned(),
            prompt_tokens: FIXED_PROMPT_TOKENS,
            seq: step,
            argument_piece_chars: 16,
        }
    }

    /// The id of call `index`: its own, or `call_<seq>_<index>`.
    pub(crate) fn call_id(&self, index: usize, own: Option<&str>) -> String {
        own.map_or_else(|| format!("call_{}_{index}", self.seq), str::to_owned)
    }

    /// Completion and total tokens for an answer of `chars` chars.
    pub(crate) fn tokens(&self, chars: usize) -> (u64, u64) {
        let completion = (chars as u64).div_ceil(4).max(1);
        (completion, self.prompt_tokens + completion)
    }
}
