//! The hash-chained conversation history of one session (SEED.md "context chain").
//!
//! **Invariant:** `hashes[i] == seal(hashes[i-1], messages[i])` for every `i`, with
//! `hashes[-1] == FNV_OFFSET`. The only mutations are `push` (seal and append), `pop`
//! (LIFO, restores the previous head in O(1)) and `clear` (used only by the compaction
//! rebuild). The session actor owns the one `Context` of a session; everyone else reads
//! snapshots, which re-walk and verify the chain.

use amber_proto::{Message, Role};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A link of the chain does not match its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "context chain broken at message {index}: stored hash {stored:016x}, recomputed {computed:016x}"
)]
pub struct ChainError {
    pub index: usize,
    pub stored: u64,
    pub computed: u64,
}

/// What a pushed message is, for the journal (the chain does not depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushKind {
    Normal,
    /// The agent's silent confirm question: crash recovery drops it when it was left
    /// unanswered, so it is recorded as such rather than recognised by its text.
    Confirm,
}

/// Mirrors every mutation of a `Context` somewhere durable (the session's log).
pub trait Journal: Send {
    fn pushed(&mut self, message: &Message, hash: u64, kind: PushKind);
    fn popped(&mut self);
    fn cleared(&mut self);
}

/// Append-only (plus LIFO pop) message history sealed by an FNV-1a hash chain.
#[derive(Default)]
pub struct Context {
    messages: Vec<Message>,
    hashes: Vec<u64>,
    journal: Option<Box<dyn Journal>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("messages", &self.messages.len())
            .field("head", &format_args!("{:016x}", self.head()))
            .field("journaled", &self.journal.is_some())
            .finish()
    }
}

impl Context {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds a context from persisted links, checking every one.
    pub fn restore(links: Vec<(Message, u64)>) -> Result<Context, ChainError> {
        let (messages, hashes) = links.into_iter().unzip();
        let context = Context {
            messages,
            hashes,
            journal: None,
        };
        context.verify()?;
        Ok(context)
    }

    /// From now on every push, pop and clear is also reported to `journal`.
    pub fn set_journal(&mut self, journal: Box<dyn Journal>) {
        self.journal = Some(journal);
    }

    /// Seals `message` onto the chain and appends it; returns the new head hash.
    pub fn push(&mut self, message: Message) -> u64 {
        self.push_kind(message, PushKind::Normal)
    }

    /// [`Context::push`], telling the journal what kind of message it is.
    pub fn push_kind(&mut self, message: Message, kind: PushKind) -> u64 {
        let hash = seal(self.head(), &message);
        if let Some(journal) = &mut self.journal {
            journal.pushed(&message, hash, kind);
        }
        self.messages.push(message);
        self.hashes.push(hash);
        hash
    }

    /// Removes the newest message; the previous head hash becomes current again.
    pub fn pop(&mut self) -> Option<Message> {
        let popped = self.messages.pop();
        if popped.is_some() {
            self.hashes.pop();
            if let Some(journal) = &mut self.journal {
                journal.popped();
            }
        }
        popped
    }

    /// Removes everything. Only the compaction rebuild may call this.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.hashes.clear();
        if let Some(journal) = &mut self.journal {
            journal.cleared();
        }
    }

    /// Hash of the newest link (`FNV_OFFSET` when empty).
    pub fn head(&self) -> u64 {
        self.hashes.last().copied().unwrap_or(FNV_OFFSET)
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The newest message, without verifying the chain.
    pub fn last(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// Re-walks the whole chain.
    pub fn verify(&self) -> Result<(), ChainError> {
        let mut prev = FNV_OFFSET;
        for (index, (message, &stored)) in self.messages.iter().zip(&self.hashes).enumerate() {
            let computed = seal(prev, message);
            if computed != stored {
                return Err(ChainError {
                    index,
                    stored,
                    computed,
                });
            }
            prev = stored;
        }
        Ok(())
    }

    /// A verified copy of the messages. A broken link is a bug: it asserts in debug builds
    /// and is logged in release, where the (possibly tampered) copy is still returned so
    /// the session keeps working.
    pub fn snapshot(&self) -> Vec<Message> {
        if let Err(err) = self.verify() {
            tracing::error!(%err, "context integrity check failed");
            debug_assert!(false, "{err}");
        }
        self.messages.clone()
    }

    /// The messages without re-walking the chain: for readers' snapshots between LLM
    /// calls, where the full verification of `snapshot` would be wasted work.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Messages with their chain hashes, for persistence.
    pub fn links(&self) -> impl Iterator<Item = (&Message, u64)> {
        self.messages.iter().zip(self.hashes.iter().copied())
    }

    #[cfg(test)]
    fn tamper(&mut self, index: usize, content: &str) {
        self.messages[index].content = content.to_owned();
    }
}

/// `h = FNV-1a(prev_h, message)`: the previous hash's bytes, then every field of the
/// message with length prefixes so no two different messages encode alike.
pub fn seal(prev: u64, message: &Message) -> u64 {
    let mut h = Fnv(FNV_OFFSET);
    h.write(&prev.to_le_bytes());
    h.write(&[role_tag(message.role)]);
    h.field(message.content.as_bytes());
    h.write(&(message.tool_calls.len() as u64).to_le_bytes());
    for call in &message.tool_calls {
        h.field(call.id.as_bytes());
        h.field(call.name.as_bytes());
        h.field(call.arguments.as_bytes());
    }
    match &message.tool_call_id {
        Some(id) => {
            h.write(&[1]);
            h.field(id.as_bytes());
        }
        None => h.write(&[0]),
    }
    h.0
}

fn role_tag(role: Role) -> u8 {
    match role {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    }
}

struct Fnv(u64);

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    fn field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolCall;

    fn sample() -> Context {
        let mut ctx = Context::new();
        ctx.push(Message::system("sys"));
        ctx.push(Message::user("hi"));
        ctx.push(Message::assistant(
            "",
            vec![ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: r#"{"path":"a"}"#.into(),
            }],
        ));
        ctx.push(Message::tool("c1", "{\"status\":\"ok\",\"output\":\"x\"}"));
        ctx
    }

    #[test]
    fn push_chains_hashes_and_verifies() {
        let ctx = sample();
        assert_eq!(ctx.len(), 4);
        ctx.verify().unwrap();
        let hashes: Vec<u64> = ctx.links().map(|(_, h)| h).collect();
        assert_eq!(hashes[1], seal(hashes[0], &Message::user("hi")));
    }

    #[test]
    fn pop_restores_the_previous_head() {
        let mut ctx = sample();
        let before = ctx.head();
        ctx.push(Message::user("extra"));
        assert_ne!(ctx.head(), before);
        assert_eq!(ctx.pop().unwrap().content, "extra");
        assert_eq!(ctx.head(), before);
        ctx.verify().unwrap();
    }

    #[test]
    fn clear_resets_to_the_offset() {
        let mut ctx = sample();
        ctx.clear();
        assert!(ctx.is_empty());
        assert_eq!(ctx.head(), FNV_OFFSET);
    }

    #[test]
    fn in_place_tampering_is_detected_at_its_index() {
        let mut ctx = sample();
        ctx.tamper(1, "hello");
        let err = ctx.verify().unwrap_err();
        assert_eq!(err.index, 1);
    }

    #[test]
    fn field_boundaries_matter() {
        // Same bytes split differently between fields must not collide.
        let a = Message::assistant(
            "ab",
            vec![ToolCall {
                id: "c".into(),
                name: "d".into(),
                arguments: String::new(),
            }],
        );
        let b = Message::assistant(
            "a",
            vec![ToolCall {
                id: "bc".into(),
                name: "d".into(),
                arguments: String::new(),
            }],
        );
        assert_ne!(seal(0, &a), seal(0, &b));
        assert_ne!(seal(0, &Message::user("x")), seal(0, &Message::system("x")));
    }

    #[test]
    fn the_journal_sees_every_mutation_and_restore_checks_links() {
        use std::sync::{Arc, Mutex};
        struct Log(Arc<Mutex<Vec<String>>>);
        impl Journal for Log {
            fn pushed(&mut self, m: &Message, hash: u64, _: PushKind) {
                self.0
                    .lock()
                    .unwrap()
                    .push(format!("push {} {hash:x}", m.content));
            }
            fn popped(&mut self) {
                self.0.lock().unwrap().push("pop".into());
            }
            fn cleared(&mut self) {
                self.0.lock().unwrap().push("clear".into());
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut ctx = sample();
        ctx.set_journal(Box::new(Log(seen.clone())));
        let h = ctx.push(Message::user("x"));
        ctx.pop();
        ctx.pop();
        let restored =
            Context::restore(ctx.links().map(|(m, h)| (m.clone(), h)).collect()).unwrap();
        assert_eq!(restored.head(), ctx.head());
        ctx.clear();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                format!("push x {h:x}"),
                "pop".into(),
                "pop".into(),
                "clear".into()
            ]
        );

        let mut links: Vec<(Message, u64)> =
            sample().links().map(|(m, h)| (m.clone(), h)).collect();
        links[2].0.content = "tampered".into();
        assert_eq!(Context::restore(links).unwrap_err().index, 2);
    }

    #[test]
    #[should_panic(expected = "context chain broken")]
    fn snapshot_asserts_in_debug_builds() {
        let mut ctx = sample();
        ctx.tamper(2, "changed");
        let _ = ctx.snapshot();
    }
}
