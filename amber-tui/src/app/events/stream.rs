//! The assistant's streams: reply and reasoning deltas, the authoritative `message_completed`,
//! and `synced`, which ends the replay and hands over the replies streaming right now.

use amber_proto::{InProgressItem, StreamKind};

use crate::app::{Action, App};
use crate::markdown::StreamingMarkdown;
use crate::transcript::{Assistant, Cell, InfoKind};

fn streaming(text: &str) -> Cell {
    let mut md = StreamingMarkdown::new();
    md.push(text);
    Cell::Assistant(Assistant::Streaming(Box::new(md)))
}

impl App {
    pub(super) fn message_delta(&mut self, item: &str, delta: &str) {
        if self.transcript.completed.contains(item) {
            return;
        }
        if let Some(&idx) = self.transcript.items.get(item)
            && let Some(slot) = self.transcript.slot_mut(idx)
            && let Cell::Assistant(Assistant::Streaming(md)) = &mut slot.cell
        {
            md.push(delta);
            return;
        }
        self.finish_reasoning();
        let idx = self.transcript.push(streaming(delta));
        self.transcript.items.insert(item.to_owned(), idx);
    }

    pub(super) fn reasoning_delta(&mut self, item: &str, delta: &str) {
        if let Some(&idx) = self.transcript.items.get(item) {
            if let Some(Cell::Reasoning { text, done: false }) = self.transcript.cell_mut(idx) {
                text.push_str(delta);
            }
            return;
        }
        let idx = self.transcript.push(Cell::Reasoning {
            text: delta.to_owned(),
            done: false,
        });
        self.transcript.items.insert(item.to_owned(), idx);
        self.transcript.open_reasoning.push(idx);
    }

    pub(super) fn message_completed(&mut self, item: String, text: String) {
        self.finish_reasoning();
        let done = Cell::Assistant(Assistant::Done(text));
        // `text` is authoritative: it replaces whatever streamed.
        match self.transcript.items.get(&item).copied() {
            Some(idx) => {
                if let Some(cell) = self.transcript.cell_mut(idx) {
                    *cell = done;
                }
            }
            None => {
                let idx = self.transcript.push(done);
                self.transcript.items.insert(item.clone(), idx);
            }
        }
        self.transcript.completed.insert(item);
    }

    /// The reasoning streaming so far is over (the reply, a tool call or the turn's end came).
    pub(super) fn finish_reasoning(&mut self) {
        for idx in std::mem::take(&mut self.transcript.open_reasoning) {
            if let Some(Cell::Reasoning { done, .. }) = self.transcript.cell_mut(idx) {
                *done = true;
            }
        }
    }

    pub(super) fn synced(&mut self, last_seq: u64, in_progress: Vec<InProgressItem>) {
        self.synced = true;
        self.history_seeded = true;
        self.last_seq = self.last_seq.max(last_seq);
        if self.last_seq < self.snapshot_seq {
            // The replay must reach what `session/get` saw: say so if the daemon lost events.
            self.note(format!(
                "history incomplete: the replay ended at event {} but the session had {}",
                self.last_seq, self.snapshot_seq
            ));
        }
        if !in_progress.is_empty() {
            self.running = true;
        }
        for item in in_progress {
            self.resume_stream(item);
        }
        if let Some(note) = self.reload_note.take() {
            self.transcript.push(Cell::Info {
                text: note,
                kind: InfoKind::Command,
            });
        }
        self.request(Action::RefreshStatus);
    }

    /// A reply streaming when the subscription was taken: its text is everything streamed so
    /// far, so it replaces a partial cell; the live deltas continue where it ends.
    fn resume_stream(&mut self, item: InProgressItem) {
        let InProgressItem {
            item_id,
            kind,
            text,
        } = item;
        if self.transcript.completed.contains(&item_id) {
            return;
        }
        let cell = match kind {
            StreamKind::Reasoning => Cell::Reasoning { text, done: false },
            StreamKind::Message => streaming(&text),
        };
        match self.transcript.items.get(&item_id).copied() {
            Some(idx) => {
                if let Some(slot) = self.transcript.cell_mut(idx) {
                    *slot = cell;
                }
            }
            None => {
                let idx = self.transcript.push(cell);
                self.transcript.items.insert(item_id, idx);
                if kind == StreamKind::Reasoning {
                    self.transcript.open_reasoning.push(idx);
                }
            }
        }
    }
}
