//! A compact posting list: `(doc, tf)` pairs appended in increasing doc
//! order, stored as LEB128 varints of the doc delta and the tf (typically two
//! bytes a posting).

/// The documents one term occurs in, with its frequency in each.
#[derive(Debug, Default, Clone)]
pub(crate) struct PostingList {
    bytes: Vec<u8>,
    last: u32,
    len: u32,
}

fn put(bytes: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        bytes.push((v as u8) | 0x80);
        v >>= 7;
    }
    bytes.push(v as u8);
}

/// Decode one varint at `*pos`; a truncated list ends as 0 (never happens:
/// lists are only written by [`put`]).
fn get(bytes: &[u8], pos: &mut usize) -> u32 {
    let mut v = 0u32;
    let mut shift = 0;
    while let Some(&b) = bytes.get(*pos) {
        *pos += 1;
        v |= u32::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            break;
        }
    }
    v
}

impl PostingList {
    /// Append a posting; `doc` must be greater than every doc already in the
    /// list (the index allocates doc ids in increasing order).
    pub(crate) fn push(&mut self, doc: u32, tf: u32) {
        let delta = if self.len == 0 { doc } else { doc - self.last };
        put(&mut self.bytes, delta);
        put(&mut self.bytes, tf);
        self.last = doc;
        self.len += 1;
    }

    /// Postings, dead documents included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// Visit every `(doc, tf)` in doc order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(u32, u32)) {
        let mut pos = 0;
        let mut doc = 0u32;
        for _ in 0..self.len {
            doc = doc.wrapping_add(get(&self.bytes, &mut pos));
            let tf = get(&self.bytes, &mut pos);
            f(doc, tf);
        }
    }

    /// The list with docs renumbered by `remap` (`u32::MAX`: dropped).
    pub(crate) fn remapped(&self, remap: &[u32]) -> Self {
        let mut out = Self::default();
        self.for_each(|doc, tf| {
            if let Some(&new) = remap.get(doc as usize)
                && new != u32::MAX
            {
                out.push(new, tf);
            }
        });
        out.bytes.shrink_to_fit();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(list: &PostingList) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        list.for_each(|d, tf| out.push((d, tf)));
        out
    }

    #[test]
    fn round_trips_small_and_large_values() {
        let mut list = PostingList::default();
        let input = [
            (0, 1),
            (1, 3),
            (200, 1),
            (70_000, 300),
            (u32::MAX - 1, u32::MAX),
        ];
        for (d, tf) in input {
            list.push(d, tf);
        }
        assert_eq!(collect(&list), input);
        assert_eq!(list.len(), 5);
    }

    #[test]
    fn small_postings_take_two_bytes() {
        let mut list = PostingList::default();
        for d in 0..100 {
            list.push(d * 3, 1);
        }
        assert_eq!(list.bytes.len(), 200);
    }

    #[test]
    fn remap_drops_and_renumbers() {
        let mut list = PostingList::default();
        for d in [1, 4, 6] {
            list.push(d, d + 10);
        }
        let remap = [u32::MAX, 0, u32::MAX, u32::MAX, u32::MAX, u32::MAX, 1];
        assert_eq!(collect(&list.remapped(&remap)), [(0, 11), (1, 16)]);
    }
}
