//! Directory options of build tools and package managers: where they really write.
//!
//! `make -C DIR`, `ninja -C DIR`, `cargo -C DIR`, `npm --prefix DIR`, `pnpm -C DIR`,
//! `yarn --cwd DIR`, `go -C DIR`, `uv --directory DIR` move the tool into `DIR` (it writes
//! there instead of the working directory); `cargo --target-dir DIR`,
//! `cargo --manifest-path FILE`, `cmake -B DIR` / `--build DIR` add a place it writes.
//! Applied to verdicts that may write (benign, unknown, destructive); both `--opt VALUE` and
//! `--opt=VALUE` forms.

use super::ShellClass;
use super::rules::{Verdict, WriteTo};
use super::words::Word;

/// (program, options that move it into a directory, options naming another written path)
#[rustfmt::skip]
const TABLE: &[(&str, &[&str], &[&str])] = &[
    ("make", &["-C", "--directory"], &[]),
    ("gmake", &["-C", "--directory"], &[]),
    ("ninja", &["-C"], &[]),
    ("cmake", &[], &["-B", "--build"]),
    ("cargo", &["-C"], &["--target-dir", "--manifest-path", "--artifact-dir", "--out-dir"]),
    ("npm", &["--prefix", "-C"], &[]),
    ("pnpm", &["-C", "--dir"], &[]),
    ("yarn", &["--cwd"], &[]),
    ("bun", &["--cwd"], &[]),
    ("go", &["-C"], &[]),
    ("uv", &["--directory", "--project"], &[]),
];

/// Adds the directories `name`'s options point at to a writing verdict's writes.
pub(super) fn with_directories<'a>(
    mut v: Verdict<'a>,
    name: &str,
    args: &'a [Word],
) -> Verdict<'a> {
    if v.class == ShellClass::ReadOnly {
        return v;
    }
    let Some((_, moves, adds)) = TABLE.iter().find(|(n, _, _)| *n == name) else {
        return v;
    };
    let moved = values(args, moves);
    let added = values(args, adds);
    if moved.is_empty() && added.is_empty() {
        return v;
    }
    // Without a directory option the tool still writes where it runs.
    if moved.is_empty() && v.writes.is_empty() {
        v.writes.push(WriteTo::Cwd);
    }
    v.writes.extend(moved);
    v.writes.extend(added);
    v
}

/// Every value of the options in `names`, stopping at `--`.
fn values<'a>(args: &'a [Word], names: &[&str]) -> Vec<WriteTo<'a>> {
    let mut out = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(text) = arg.text() else { continue };
        if text == "--" {
            break;
        }
        if names.contains(&text) {
            if let Some(value) = iter.next() {
                out.push(WriteTo::Word(value));
            }
            continue;
        }
        for name in names {
            let inline = if name.starts_with("--") {
                text.strip_prefix(name).and_then(|r| r.strip_prefix('='))
            } else {
                // `-Cdir`
                text.strip_prefix(name).filter(|r| !r.is_empty())
            };
            if let Some(value) = inline {
                out.push(WriteTo::Literal(value.to_owned()));
            }
        }
    }
    out
}
