//! GNU `tar`, read against its option table: listing (`-t`, `--diff`) reads the archive;
//! extracting writes `-C DIR` (or the working directory); creating and updating write the
//! archive and read their operands. Options that run programs — `--to-command`,
//! `-I`/`--use-compress-program`, `--checkpoint-action`, `-F`/`--info-script`/
//! `--new-volume-script`, `--rmt-command`, `--rsh-command` — and `--remove-files` make it
//! unknown, as does a remote archive (`host:file`, which tar opens through rsh). The old
//! style `tar czf out.tar dir` (first word without a dash) is read letter by letter.

use super::ShellClass;
use super::argspec::{self, Arg, Problem, Spec};
use super::rules::{ReadFrom, Verdict, WriteTo};
use super::words::Word;

#[rustfmt::skip]
const TAR: Spec = Spec {
    options: &[
        "-c", "-x", "-t", "-r", "-u", "-d", "-A", "--create", "--extract", "--get", "--list",
        "--append", "--update", "--diff", "--compare", "--concatenate", "--catenate",
        "--delete", "-v", "--verbose", "-z", "-j", "-J", "-a", "-Z", "--zstd", "--gzip",
        "--gunzip", "--ungzip", "--bzip2", "--xz", "--lzip", "--lzma", "--lzop",
        "--auto-compress", "--compress", "--uncompress", "-p", "--preserve-permissions",
        "--same-permissions", "--no-same-permissions", "--same-owner", "--no-same-owner",
        "--numeric-owner", "--owner=", "--group=", "--mode=", "--mtime=", "-k",
        "--keep-old-files", "--skip-old-files", "--overwrite", "--keep-newer-files",
        "--unlink-first", "-U", "--recursive-unlink", "-m", "--touch", "-O", "--to-stdout",
        "-P", "--absolute-names", "-h", "--dereference", "--hard-dereference", "--exclude=",
        "--exclude-vcs", "--exclude-vcs-ignores", "--exclude-caches", "--exclude-backups",
        "--anchored", "--no-anchored", "--wildcards", "--no-wildcards", "--strip-components=",
        "--transform=", "--xform=", "--null", "--no-null", "-b=", "--blocking-factor=", "-B",
        "--read-full-records", "-i", "--ignore-zeros", "-S", "--sparse", "--totals?", "-W",
        "--verify", "--one-file-system", "--no-recursion", "--recursion", "--sort=",
        "--format=", "-H=", "--xattrs", "--no-xattrs", "--acls", "--no-acls", "--selinux",
        "--no-selinux", "-R", "--block-number", "--show-transformed-names", "--warning=",
        "--checkpoint?", "-N=", "--newer=", "--after-date=", "--newer-mtime=", "-l",
        "--check-links", "-o", "-s", "--preserve-order", "--same-order", "--label=", "-V=",
        "--quoting-style=", "--utc", "--full-time", "--force-local", "--no-overwrite-dir",
        "--delay-directory-restore", "--ignore-failed-read", "--occurrence?",
        "--exclude-tag=", "--exclude-tag-all=", "--exclude-tag-under=", "--exclude-ignore=",
        "--exclude-ignore-recursive=", "--level=", "--posix", "--old-archive",
        "--check-device", "--no-check-device", "--no-ignore-command-error",
        "--ignore-command-error", "--restrict", "--backup?", "--suffix=", "-w",
        "--interactive", "--confirmation", "-M", "--multi-volume", "-f=", "--file=", "-C=",
        "--directory=", "-L=", "--tape-length=",
    ],
    reads: &["-X=", "--exclude-from=", "-T=", "--files-from="],
    writes: &["--index-file=", "-g=", "--listed-incremental=", "--volno-file="],
    danger: &[
        ("--to-command=", "runs a program for every extracted file"),
        ("-I=", "runs a compression program"),
        ("--use-compress-program=", "runs a compression program"),
        ("--checkpoint-action=", "runs actions (exec=COMMAND) at checkpoints"),
        ("-F=", "runs a script at the end of each volume"),
        ("--info-script=", "runs a script at the end of each volume"),
        ("--new-volume-script=", "runs a script at the end of each volume"),
        ("--rmt-command=", "runs a remote tape program"),
        ("--rsh-command=", "runs a remote shell"),
        ("--remove-files", "deletes the files it archives"),
    ],
    numbers: false,
};

/// Letters of the old style whose value is the next word, in order.
const OLD_VALUED: &[char] = &['f', 'C', 'T', 'X', 'b', 'N', 'H', 'V', 'L', 'g', 'I', 'F'];

pub(super) fn classify<'a>(args: &'a [Word], scope: &str) -> Verdict<'a> {
    let unknown = |why: String| Verdict::new(ShellClass::Unknown, scope, why);
    let (mut old, rest) = match old_style(args) {
        Ok(split) => split,
        Err(why) => return unknown(why),
    };
    let parsed = match argspec::parse(&TAR, rest) {
        Ok(p) => p,
        Err(Problem::Danger(why) | Problem::Unknown(why)) => return unknown(why),
    };
    for (letter, value) in parsed.seen.iter().filter_map(|(name, v)| {
        let letter = name.strip_prefix('-').filter(|l| l.len() == 1)?;
        Some((letter.chars().next()?, v.clone()))
    }) {
        old.push((letter, value));
    }
    let letter = |c: char| old.iter().any(|(l, _)| *l == c);
    let value_of = |c: char, long: &[&str]| {
        old.iter()
            .filter(|(l, _)| *l == c)
            .filter_map(|(_, v)| v.clone())
            .chain(parsed.values(long).into_iter().cloned())
            .collect::<Vec<Arg<'a>>>()
    };
    let archives = value_of('f', &["--file"]);
    if archives.iter().any(|a| {
        a.text()
            .is_some_and(|t| t.split_once(':').is_some_and(|(h, _)| !h.contains('/')))
    }) && !parsed.has(&["--force-local"])
    {
        return unknown("tar: the archive is on a remote host (tar runs rsh)".to_owned());
    }
    let mut reads: Vec<ReadFrom<'a>> = value_of('T', &[]).into_iter().map(ReadFrom::Arg).collect();
    reads.extend(value_of('X', &[]).into_iter().map(ReadFrom::Arg));
    reads.extend(parsed.reads.iter().cloned().map(ReadFrom::Arg));
    let write = |a: Arg<'a>| match a {
        Arg::Word(w) => WriteTo::Word(w),
        Arg::Inline(t) => WriteTo::Literal(t),
    };
    // Index and incremental snapshot files, whatever the mode.
    let side_writes: Vec<WriteTo<'a>> = parsed.writes.iter().cloned().map(write).collect();
    let listing = letter('t') || letter('d') || parsed.has(&["--list", "--diff", "--compare"]);
    if listing {
        reads.extend(archives.into_iter().map(ReadFrom::Arg));
        if !side_writes.is_empty() {
            let mut v = Verdict::new(ShellClass::Benign, scope, "writes an index file");
            v.writes = side_writes;
            return v.reading(reads);
        }
        return Verdict::new(ShellClass::ReadOnly, scope, "lists an archive").reading(reads);
    }
    if letter('x') || parsed.has(&["--extract", "--get"]) {
        reads.extend(archives.into_iter().map(ReadFrom::Arg));
        let to_stdout = letter('O') || parsed.has(&["--to-stdout"]);
        let dirs = value_of('C', &["--directory"]);
        let mut v = Verdict::new(ShellClass::Benign, scope, "extracts an archive").reading(reads);
        v.writes = side_writes;
        if dirs.is_empty() && !to_stdout {
            v.writes.push(WriteTo::Cwd);
        }
        v.writes.extend(dirs.into_iter().map(write));
        return v;
    }
    // Creating or updating: writes the archive, reads the operands (from `-C DIR`).
    if archives.is_empty() {
        return unknown("tar: archive not resolved".to_owned());
    }
    let moved = !value_of('C', &["--directory"]).is_empty();
    let mut v = Verdict::new(ShellClass::Benign, scope, "writes an archive");
    v.writes = side_writes;
    v.writes.extend(archives.into_iter().map(write));
    if moved {
        // Operands are relative to a directory we do not follow.
        reads.push(ReadFrom::Unknown("paths relative to tar -C"));
    } else {
        reads.extend(parsed.operands.iter().map(|w| ReadFrom::Arg(Arg::Word(w))));
    }
    v.recursive = true;
    v.reading(reads)
}

/// The letters of an old-style first word (`czf`) with their values, and the words after.
#[allow(clippy::type_complexity)]
fn old_style(args: &[Word]) -> Result<(Vec<(char, Option<Arg<'_>>)>, &[Word]), String> {
    let Some(first) = args.first() else {
        return Ok((Vec::new(), args));
    };
    let Some(text) = first.text() else {
        return Err("tar: arguments expand at run time".to_owned());
    };
    if text.starts_with('-') {
        return Ok((Vec::new(), args));
    }
    let mut letters = Vec::new();
    let mut next = 1;
    for c in text.chars() {
        if OLD_VALUED.contains(&c) {
            let value = args
                .get(next)
                .ok_or(format!("tar: -{c} without its value"))?;
            next += 1;
            letters.push((c, Some(Arg::Word(value))));
        } else {
            letters.push((c, None));
        }
    }
    // Each letter must be a known short option, and not a dangerous one.
    for (c, _) in &letters {
        let probe = [Word {
            raw: format!("-{c}"),
            literal: Some(format!(
                "-{c}{}",
                if OLD_VALUED.contains(c) { "x" } else { "" }
            )),
            ..Word::default()
        }];
        if let Err(Problem::Danger(why) | Problem::Unknown(why)) = argspec::parse(&TAR, &probe) {
            return Err(why);
        }
    }
    Ok((letters, args.get(next..).unwrap_or_default()))
}
