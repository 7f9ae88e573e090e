//! A generated source tree for the search KPIs: N Rust-like files (~40 lines of identifiers in
//! camelCase and snake_case, so the BM25 tokenizer has work) in directories of 100, with a
//! `needle_marker_N` comment in every 200th file for grep. Deterministic for a given seed.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::error::BenchError;

const WORDS: &[&str] = &[
    "parse", "config", "value", "reader", "buffer", "token", "stream", "handler", "request",
    "session", "index", "query", "cache", "store", "event", "client", "server", "socket", "frame",
    "message", "decode", "encode", "record", "context", "payload", "header", "matcher", "walker",
    "builder", "registry", "snapshot", "journal", "policy", "approval", "render", "layout",
];
/// Every this-many-th file carries a needle.
pub(crate) const NEEDLE_EVERY: usize = 200;
const FILES_PER_DIR: usize = 100;

/// What was generated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TreeInfo {
    pub files: usize,
    pub bytes: u64,
    pub needles: usize,
}

/// xorshift64*: deterministic and dependency-free; quality is irrelevant here.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn word(&mut self) -> &'static str {
        // The modulus keeps the value below WORDS.len(), so the cast cannot truncate.
        WORDS[(self.next() % WORDS.len() as u64) as usize]
    }
}

fn camel(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

/// The text of file `i`.
fn file_text(rng: &mut Rng, i: usize) -> String {
    let mut out = String::with_capacity(2048);
    let (a, b) = (rng.word(), rng.word());
    let _ = writeln!(
        out,
        "//! Module {i}: {a} {b} helpers.\nuse std::collections::HashMap;\n"
    );
    if i.is_multiple_of(NEEDLE_EVERY) {
        let _ = writeln!(out, "// needle_marker_{i}: found by the grep benchmark\n");
    }
    let ty = format!("{}{}", camel(a), camel(b));
    let (f1, f2) = (rng.word(), rng.word());
    let _ = writeln!(
        out,
        "pub struct {ty} {{\n    {f1}_count: usize,\n    {f2}_map: HashMap<String, u64>,\n}}\n"
    );
    let _ = writeln!(out, "impl {ty} {{");
    for _ in 0..3 {
        let (v, w, x) = (rng.word(), rng.word(), rng.word());
        let _ = writeln!(out, "    /// {} the {w} {x} of this {a}.", camel(v));
        let _ = writeln!(
            out,
            "    pub fn {v}_{w}(&mut self, {x}: &str) -> Option<u64> {{"
        );
        let _ = writeln!(
            out,
            "        let {w}_{x} = self.{f2}_map.get({x}).copied()?;"
        );
        let _ = writeln!(out, "        self.{f1}_count += 1;");
        let _ = writeln!(
            out,
            "        let {v}{} = {w}_{x}.wrapping_mul({});",
            camel(x),
            rng.next() % 997
        );
        let _ = writeln!(
            out,
            "        if {v}{} > {} {{\n            return None;\n        }}",
            camel(x),
            rng.next() % 10_000
        );
        let _ = writeln!(out, "        Some({v}{})\n    }}\n", camel(x));
    }
    let _ = writeln!(out, "}}");
    out
}

/// The path of file `i` of a generated tree, relative to its root.
pub(crate) fn rel_path(i: usize) -> String {
    format!("src/mod_{:03}/file_{i:05}.rs", i / FILES_PER_DIR)
}

/// How far in the past the tree's mtimes are set. amberd does not trust an mtime younger
/// than 2 s (it could hide a later change in the same tick) and re-reads such files on
/// every query: a tree queried right after it was written would never be warm.
const AGE: Duration = Duration::from_secs(3600);

/// Writes `files` files under `root` (created if missing), with mtimes an hour old.
pub(crate) fn generate(root: &Path, files: usize, seed: u64) -> Result<TreeInfo, BenchError> {
    let past = SystemTime::now()
        .checked_sub(AGE)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut rng = Rng(seed | 1);
    let mut bytes = 0u64;
    let mut needles = 0;
    for i in 0..files {
        let path = root.join(rel_path(i));
        if i.is_multiple_of(FILES_PER_DIR)
            && let Some(dir) = path.parent()
        {
            std::fs::create_dir_all(dir)
                .map_err(BenchError::io(format!("create {}", dir.display())))?;
        }
        let text = file_text(&mut rng, i);
        bytes += text.len() as u64;
        if i.is_multiple_of(NEEDLE_EVERY) {
            needles += 1;
        }
        let mut file =
            File::create(&path).map_err(BenchError::io(format!("create {}", path.display())))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.set_modified(past))
            .map_err(BenchError::io(format!("write {}", path.display())))?;
    }
    // Directories last: adding files changed their mtimes.
    let mut dirs = vec![root.to_owned(), root.join("src")];
    dirs.extend(
        (0..files.div_ceil(FILES_PER_DIR)).map(|d| root.join("src").join(format!("mod_{d:03}"))),
    );
    for dir in dirs.iter().rev() {
        File::open(dir)
            .and_then(|d| d.set_modified(past))
            .map_err(BenchError::io(format!(
                "set the mtime of {}",
                dir.display()
            )))?;
    }
    Ok(TreeInfo {
        files,
        bytes,
        needles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_needles_and_identifiers() {
        let dir = tempfile::tempdir().unwrap();
        let info = generate(dir.path(), 401, 7).unwrap();
        assert_eq!((info.files, info.needles), (401, 3));
        let first = std::fs::read_to_string(dir.path().join("src/mod_000/file_00000.rs")).unwrap();
        assert!(first.contains("needle_marker_0"), "{first}");
        assert!(first.contains("pub fn "), "{first}");
        let last = dir.path().join(rel_path(400));
        assert_eq!(rel_path(400), "src/mod_004/file_00400.rs");
        assert!(
            std::fs::read_to_string(last)
                .unwrap()
                .contains("needle_marker_400")
        );
    }
}
