//! The code-aware tokenizer of the semantic index.
//!
//! Text is split into identifiers (runs of ASCII letters, digits, `_`, any
//! non-ASCII byte, and `-` between a letter/digit and a letter: kebab-case).
//! Each identifier yields its parts — split at `_` / `-` and at camelCase /
//! PascalCase boundaries (`HTTPServer` → `http`, `server`) — and, when it has
//! more than one part, the whole identifier with the separators dropped
//! (`get_user_name` and `getUserName` both give `getusername`), so a query in
//! one naming style finds identifiers in another. Everything is lowercased;
//! 1-byte tokens and absurdly long identifiers (blobs) are dropped.
//!
//! Tokens are never allocated: they are hashed ([`hash_token`]) into 64-bit
//! term keys as they are produced.

/// Identifiers longer than this (bytes) are data, not names: skipped.
pub const MAX_IDENT_BYTES: usize = 96;

/// What kind of token was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// One part of an identifier (or a whole one-part identifier).
    Part,
    /// A whole multi-part identifier, separators dropped.
    Whole,
}

/// A 64-bit key for a lowercased token: length-seeded multiply-rotate over
/// 8-byte words, finished with a full avalanche so keys can index a map
/// directly. Collisions only merge two terms' postings.
pub fn hash_token(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = (bytes.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    // fmix64 from MurmurHash3.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Bytes that belong to identifiers: ASCII letters and digits, `_`, and
/// every byte of a non-ASCII character.
static WORD: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        b += 1;
    }
    table
};

#[inline]
fn is_word_byte(b: u8) -> bool {
    WORD[b as usize]
}

/// A reusable tokenizer (it owns its scratch buffers).
#[derive(Debug, Default)]
pub struct Tokenizer {
    part: Vec<u8>,
    whole: Vec<u8>,
}

impl Tokenizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Call `emit(key, kind)` for every token of `text`, in order.
    pub fn tokens(&mut self, text: &[u8], mut emit: impl FnMut(u64, TokenKind)) {
        self.for_each(text, |bytes, kind| emit(hash_token(bytes), kind));
    }

    /// Call `emit(token, kind)` with the lowercased bytes of every token.
    pub fn for_each(&mut self, text: &[u8], mut emit: impl FnMut(&[u8], TokenKind)) {
        let mut i = 0;
        let n = text.len();
        while i < n {
            if !is_word_byte(text[i]) {
                i += 1;
                continue;
            }
            let start = i;
            loop {
                while i < n && is_word_byte(text[i]) {
                    i += 1;
                }
                // kebab-case: `-` between a letter/digit and a letter.
                let joins = i + 1 < n
                    && text[i] == b'-'
                    && text[i - 1].is_ascii_alphanumeric()
                    && text[i + 1].is_ascii_alphabetic();
                if !joins {
                    break;
                }
                i += 1;
            }
            let ident = &text[start..i];
            if ident.len() > MAX_IDENT_BYTES {
                continue;
            }
            // Fast path: a lowercase one-part identifier is its own token.
            if !ident
                .iter()
                .any(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
            {
                if ident.len() > 1 {
                    emit(ident, TokenKind::Part);
                }
                continue;
            }
            self.identifier(ident, &mut emit);
        }
    }

    /// Emit the parts of one identifier, then the whole if it had several.
    fn identifier(&mut self, ident: &[u8], emit: &mut impl FnMut(&[u8], TokenKind)) {
        self.part.clear();
        self.whole.clear();
        let mut parts = 0usize;
        let mut prev: u8 = 0;
        for (k, &b) in ident.iter().enumerate() {
            if b == b'_' || b == b'-' {
                parts += flush(&mut self.part, &mut self.whole, emit);
                prev = b;
                continue;
            }
            if b.is_ascii_uppercase() {
                let next_lower = ident.get(k + 1).is_some_and(u8::is_ascii_lowercase);
                // `fooBar`, `v2Beta`: a capital after a lowercase letter or digit;
                // `HTTPServer`: the last capital of a run, before a lowercase letter.
                if prev.is_ascii_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_ascii_uppercase() && next_lower)
                {
                    parts += flush(&mut self.part, &mut self.whole, emit);
                }
            }
            self.part.push(b.to_ascii_lowercase());
            prev = b;
        }
        parts += flush(&mut self.part, &mut self.whole, emit);
        if parts > 1 && self.whole.len() > 1 {
            emit(&self.whole, TokenKind::Whole);
        }
    }
}

/// Emit the pending part (if it has 2+ bytes); 1 if a part was consumed.
fn flush(
    part: &mut Vec<u8>,
    whole: &mut Vec<u8>,
    emit: &mut impl FnMut(&[u8], TokenKind),
) -> usize {
    if part.is_empty() {
        return 0;
    }
    if part.len() > 1 {
        emit(part, TokenKind::Part);
    }
    whole.extend_from_slice(part);
    part.clear();
    1
}

/// The distinct tokens of a query with their weights: whole identifiers weigh
/// more than parts (a hit on the whole name is the best evidence).
pub fn query_terms(query: &str, whole_boost: f32) -> Vec<(u64, f32)> {
    let mut terms: Vec<(u64, f32)> = Vec::new();
    Tokenizer::new().tokens(query.as_bytes(), |key, kind| {
        let weight = match kind {
            TokenKind::Part => 1.0,
            TokenKind::Whole => whole_boost,
        };
        match terms.iter_mut().find(|(k, _)| *k == key) {
            Some((_, w)) => *w = w.max(weight),
            None => terms.push((key, weight)),
        }
    });
    terms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        Tokenizer::new().for_each(text.as_bytes(), |t, kind| {
            let mut s = String::from_utf8(t.to_vec()).unwrap();
            if kind == TokenKind::Whole {
                s.insert(0, '=');
            }
            out.push(s);
        });
        out
    }

    #[test]
    fn splits_naming_styles_and_keeps_the_whole() {
        assert_eq!(
            tokens("getUserName"),
            ["get", "user", "name", "=getusername"]
        );
        assert_eq!(
            tokens("get_user_name"),
            ["get", "user", "name", "=getusername"]
        );
        assert_eq!(
            tokens("GetUserName"),
            ["get", "user", "name", "=getusername"]
        );
        assert_eq!(
            tokens("get-user-name"),
            ["get", "user", "name", "=getusername"]
        );
        assert_eq!(tokens("HTTPServer"), ["http", "server", "=httpserver"]);
        assert_eq!(tokens("parseHTTP"), ["parse", "http", "=parsehttp"]);
        assert_eq!(
            tokens("MAX_LINE_BYTES"),
            ["max", "line", "bytes", "=maxlinebytes"]
        );
        assert_eq!(
            tokens("base64Encode"),
            ["base64", "encode", "=base64encode"]
        );
    }

    #[test]
    fn splits_on_punctuation_lowercases_and_drops_short_tokens() {
        assert_eq!(
            tokens("fn main() { let x = a.b(Foo::new); }"),
            ["fn", "main", "let", "foo", "new"]
        );
        assert_eq!(tokens("__init__"), ["init"]);
        assert_eq!(
            tokens("a - b, x-1, --flag-name"),
            ["flag", "name", "=flagname"]
        );
        assert_eq!(tokens("Grüße wörld"), ["grüße", "wörld"]);
        assert!(tokens(&"x".repeat(MAX_IDENT_BYTES + 1)).is_empty());
        assert_eq!(tokens("aB"), ["=ab"]);
    }

    #[test]
    fn hashes_are_stable_and_distinct() {
        assert_eq!(hash_token(b"user"), hash_token(b"user"));
        let words: Vec<&[u8]> = vec![
            b"",
            b"a",
            b"ab",
            b"ba",
            b"abcdefgh",
            b"abcdefghi",
            b"abcdefgh\0",
        ];
        let mut keys: Vec<u64> = words.iter().map(|w| hash_token(w)).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), words.len());
    }

    #[test]
    fn query_terms_dedupe_and_boost_wholes() {
        let terms = query_terms("userName user", 2.0);
        assert_eq!(terms.len(), 3);
        assert_eq!(terms[0], (hash_token(b"user"), 1.0));
        assert_eq!(terms[2], (hash_token(b"username"), 2.0));
        assert!(query_terms("a ! ?", 2.0).is_empty());
    }
}
