//! The option tables of the programs [`super::readers`] treats as read-only: per program,
//! the options it knows (anything else is unknown and asks), the options naming a file it
//! reads or writes, the options that run a program or load code, and what its operands are.
//!
//! Dangerous options listed here (the table-driven test in `tests_options.rs` has one
//! command line for each): `rg --pre`/`--hostname-bin`, `sort --compress-program`,
//! `file -C`, `nm`/`objdump --plugin`, `man -P`/`-H`/`-p`/`-C`, `cloc --vcs`/
//! `--extract-with`, `tree -o` and `sort -o` write.

use super::argspec::Spec;

/// What a program's operands are.
#[derive(Debug, Clone, Copy)]
pub(super) enum Operands {
    /// Files it reads; none: stdin.
    Files,
    /// Files or directories it reads; none: the working directory.
    FilesOrCwd,
    /// A pattern (or filter, or program) first unless one of these options gave it, then
    /// files; none: stdin, or the working directory when it reads recursively.
    PatternThen(&'static [&'static str]),
    /// One text operand (`look STRING FILE`), then files.
    TextThen,
    /// Names, not paths (`man PAGE`).
    Text,
}

/// When it reads directories recursively.
#[derive(Debug, Clone, Copy)]
pub(super) enum Recursion {
    Never,
    Always,
    With(&'static [&'static str]),
}

pub(super) struct Reader {
    pub names: &'static [&'static str],
    pub spec: Spec,
    pub operands: Operands,
    pub recursion: Recursion,
}

const fn reader(names: &'static [&'static str], spec: Spec, operands: Operands) -> Reader {
    Reader {
        names,
        spec,
        operands,
        recursion: Recursion::Never,
    }
}

pub(super) fn lookup(name: &str) -> Option<&'static Reader> {
    READERS.iter().find(|r| r.names.contains(&name))
}

#[rustfmt::skip]
const GREP: Spec = Spec {
    options: &[
        "-E", "-F", "-G", "-P", "-e=", "-i", "-y", "-v", "-w", "-x", "-c", "--color?", "--colour?",
        "-L", "-l", "-m=", "-o", "-q", "-s", "-b", "-H", "-h", "--label=", "-n", "-T", "-Z", "-z",
        "-A=", "-B=", "-C=", "-a", "-D=", "-d=", "-r", "-R", "-U", "-I", "--no-ignore-case",
        "--binary-files=", "--include=", "--exclude=", "--exclude-dir=", "--line-buffered",
        "--null", "--null-data", "--extended-regexp", "--fixed-strings", "--basic-regexp",
        "--perl-regexp", "--regexp=", "--ignore-case", "--word-regexp", "--line-regexp",
        "--count", "--files-without-match", "--files-with-matches", "--max-count=",
        "--only-matching", "--quiet", "--silent", "--no-messages", "--byte-offset",
        "--with-filename", "--no-filename", "--line-number", "--initial-tab",
        "--after-context=", "--before-context=", "--context=", "--text", "--devices=",
        "--directories=", "--recursive", "--dereference-recursive", "--binary",
        "--invert-match", "-V",
    ],
    reads: &["-f=", "--file=", "--exclude-from="],
    writes: &[],
    danger: &[],
    numbers: true,
};

#[rustfmt::skip]
const RG: Spec = Spec {
    options: &[
        "-e=", "--regexp=", "-i", "--ignore-case", "-s", "--case-sensitive", "-S", "--smart-case",
        "-v", "--invert-match", "-w", "--word-regexp", "-x", "--line-regexp", "-F",
        "--fixed-strings", "-P", "--pcre2", "--engine=", "-U", "--multiline", "--no-multiline",
        "--multiline-dotall", "-n", "--line-number", "-N", "--no-line-number", "-H",
        "--with-filename", "-I", "--no-filename", "-c", "--count", "--count-matches", "-l",
        "--files-with-matches", "--files-without-match", "-L", "--follow", "--no-follow", "-o",
        "--only-matching", "-q", "--quiet", "-r=", "--replace=", "-t=", "--type=", "-T=",
        "--type-not=", "--type-add=", "--type-clear=", "--type-list", "-g=", "--glob=",
        "--iglob=", "--glob-case-insensitive", "--hidden", "--no-hidden", "-.", "-u",
        "--unrestricted", "--no-ignore", "--no-ignore-vcs", "--no-ignore-dot",
        "--no-ignore-parent", "--no-ignore-global", "--no-ignore-exclude", "--no-ignore-files",
        "--no-require-git", "--ignore", "-A=", "-B=", "-C=", "--context=", "--after-context=",
        "--before-context=", "-m=", "--max-count=", "-d=", "--max-depth=", "--maxdepth=",
        "--max-filesize=", "--color=", "--colors=", "--column", "--no-column", "--heading",
        "--no-heading", "--json", "--no-json", "--vimgrep", "-0", "--null", "--null-data", "-p",
        "--pretty", "--sort=", "--sortr=", "--sort-files", "--files", "--trim", "--no-trim",
        "--stats", "--no-stats", "-j=", "--threads=", "-M=", "--max-columns=",
        "--max-columns-preview", "-a", "--text", "--no-text", "--binary", "--no-binary",
        "--passthru", "--line-buffered", "--block-buffered", "--crlf", "--no-crlf",
        "--no-config", "--debug", "--trace", "--encoding=", "-E=", "--mmap", "--no-mmap",
        "--one-file-system", "--no-one-file-system", "--no-messages", "--messages",
        "--no-unicode", "--unicode", "--include-zero", "--auto-hybrid-regex", "-b",
        "--byte-offset", "--path-separator=", "--context-separator=", "--no-context-separator",
        "--field-match-separator=", "--field-context-separator=", "--dfa-size-limit=",
        "--regex-size-limit=", "--hyperlink-format=", "--no-pcre2-unicode", "--pcre2-version",
        "--type-list", "--invert-match", "-h", "-V", "--pre-glob=", "-z", "--search-zip",
        "--no-search-zip", "--smart-case", "--line-number", "--quiet",
    ],
    reads: &["-f=", "--file=", "--ignore-file="],
    writes: &[],
    danger: &[
        ("--pre=", "runs a program on every file searched"),
        ("--hostname-bin=", "runs a program to get the host name"),
    ],
    numbers: false,
};

#[rustfmt::skip]
const SORT: Spec = Spec {
    options: &[
        "-b", "-d", "-f", "-g", "-i", "-M", "-h", "-n", "-R", "-r", "-V", "-c", "-C", "-m", "-s",
        "-u", "-z", "-k=", "-t=", "-S=", "--parallel=", "--batch-size=", "--debug",
        "--ignore-leading-blanks", "--dictionary-order", "--ignore-case",
        "--general-numeric-sort", "--ignore-nonprinting", "--month-sort", "--human-numeric-sort",
        "--numeric-sort", "--random-sort", "--reverse", "--version-sort", "--sort=", "--check?",
        "--merge", "--stable", "--unique", "--zero-terminated", "--key=", "--field-separator=",
        "--buffer-size=", "-T=", "--temporary-directory=",
    ],
    reads: &["--files0-from=", "--random-source="],
    writes: &["-o=", "--output="],
    danger: &[("--compress-program=", "runs a program to compress temporary files")],
    numbers: false,
};

#[rustfmt::skip]
const LS: Spec = Spec::harmless(&[
    "-a", "-A", "-b", "-B", "-c", "-C", "-d", "-D", "-f", "-F", "-g", "-G", "-h", "-H", "-i",
    "-I=", "-k", "-l", "-L", "-m", "-n", "-N", "-o", "-p", "-q", "-Q", "-r", "-R", "-s", "-S",
    "-t", "-T=", "-u", "-U", "-v", "-w=", "-x", "-X", "-Z", "-1", "--all", "--almost-all",
    "--author", "--escape", "--block-size=", "--ignore-backups", "--color?", "--colour?",
    "--directory", "--dired", "--classify?", "--file-type", "--format=", "--full-time",
    "--group-directories-first", "--no-group", "--human-readable", "--si",
    "--dereference-command-line", "--dereference-command-line-symlink-to-dir", "--hide=",
    "--hyperlink?", "--indicator-style=", "--inode", "--ignore=", "--kibibytes",
    "--dereference", "--literal", "--numeric-uid-gid", "--hide-control-chars",
    "--show-control-chars", "--quote-name", "--quoting-style=", "--reverse", "--recursive",
    "--size", "--sort=", "--time=", "--time-style=", "--tabsize=", "--width=", "--context",
    "--zero",
]);

#[rustfmt::skip]
const DIFF: Spec = Spec {
    options: &[
        "-a", "-b", "-B", "-c", "-C=", "-d", "-D=", "-e", "-E", "-i", "-I=", "-l", "-n", "-N",
        "-p", "-q", "-r", "-s", "-S=", "-t", "-T", "-u", "-U=", "-v", "-w", "-W=", "-x=", "-y",
        "-Z", "--normal", "--brief", "--report-identical-files", "--context?", "--unified?",
        "--ed", "--rcs", "--side-by-side", "--width=", "--left-column",
        "--suppress-common-lines", "--show-c-function", "--show-function-line=", "--label=",
        "--expand-tabs", "--initial-tab", "--tabsize=", "--suppress-blank-empty", "--paginate",
        "--recursive", "--no-dereference", "--new-file", "--unidirectional-new-file",
        "--ignore-file-name-case", "--no-ignore-file-name-case", "--exclude=",
        "--starting-file=", "--ignore-case", "--ignore-tab-expansion",
        "--ignore-trailing-space", "--ignore-space-change", "--ignore-all-space",
        "--ignore-blank-lines", "--ignore-matching-lines=", "--text", "--strip-trailing-cr",
        "--minimal", "--horizon-lines=", "--speed-large-files", "--color?", "--palette=",
        "--line-format=", "--old-line-format=", "--new-line-format=",
        "--unchanged-line-format=", "--old-group-format=", "--new-group-format=",
        "--changed-group-format=", "--unchanged-group-format=", "--ifdef=",
    ],
    reads: &["-X=", "--exclude-from=", "--from-file=", "--to-file="],
    writes: &[],
    danger: &[],
    numbers: false,
};

#[rustfmt::skip]
const FILE: Spec = Spec {
    options: &[
        "-b", "-d", "-E", "-h", "-i", "-k", "-l", "-L", "-N", "-n", "-p", "-r", "-s", "-S", "-z",
        "-Z", "-0", "-e=", "-F=", "-P=", "--brief", "--mime", "--mime-type", "--mime-encoding",
        "--keep-going", "--dereference", "--no-dereference", "--uncompress",
        "--uncompress-noreport", "--special-files", "--no-buffer", "--no-pad", "--preserve-date",
        "--raw", "--print0", "--exclude=", "--exclude-quiet=", "--separator=", "--extension",
        "--apple", "--list", "--parameter=", "--no-sandbox",
    ],
    reads: &["-f=", "--files-from=", "-m=", "--magic-file="],
    writes: &[],
    danger: &[("-C", "writes a compiled magic file"), ("--compile", "writes a compiled magic file")],
    numbers: false,
};

#[rustfmt::skip]
const MAN: Spec = Spec {
    options: &[
        "-k", "-f", "-w", "-W", "-a", "-l", "-s=", "-S=", "-M=", "-L=", "-m=", "-K", "-I", "-i",
        "-u", "-7", "-E=", "--regex", "--wildcard", "--names-only", "--where", "--path",
        "--where-cat", "--location", "--location-cat", "--all", "--apropos", "--whatis",
        "--global-apropos", "--sections=", "--manpath=", "--locale=", "--systems=",
        "--local-file", "--ascii", "--encoding=", "--no-hyphenation", "--nh",
        "--no-justification", "--nj", "--match-case", "--ignore-case", "--update",
        "--no-subpages", "--catman", "--debug", "--default", "--warnings?",
    ],
    reads: &[],
    writes: &[],
    danger: &[
        ("-P=", "runs a pager program"), ("--pager=", "runs a pager program"),
        ("-H?", "runs a browser"), ("--html?", "runs a browser"),
        ("-X?", "runs a viewer"), ("--gxditview?", "runs a viewer"),
        ("-p=", "runs preprocessors"), ("--preprocessor=", "runs preprocessors"),
        ("-C=", "reads another configuration"), ("--config-file=", "reads another configuration"),
        ("-t", "runs troff"), ("--troff", "runs troff"), ("-T?", "runs troff"),
        ("--troff-device?", "runs troff"), ("-Z", "runs troff"), ("--ditroff", "runs troff"),
        ("-R=", "recodes pages"), ("--recode=", "recodes pages"),
    ],
    numbers: false,
};

const CHECKSUM: Spec = Spec::harmless(&[
    "-b",
    "-c",
    "-t",
    "-z",
    "-w",
    "-l=",
    "--binary",
    "--check",
    "--tag",
    "--text",
    "--zero",
    "--ignore-missing",
    "--quiet",
    "--status",
    "--strict",
    "--warn",
    "--length=",
    "--untagged",
    "-a=",
    "--algorithm=",
    "--base64",
    "--raw",
    "--debug",
    "-r",
    "-s",
    "--sysv",
]);

#[rustfmt::skip]
const TAIL: Spec = Spec {
    options: &[
        "-c=", "-f", "-F", "-n=", "-q", "-s=", "-v", "-z", "--bytes=", "--follow?", "--lines=",
        "--max-unchanged-stats=", "--pid=", "--quiet", "--retry", "--silent", "--sleep-interval=",
        "--verbose", "--zero-terminated",
    ],
    reads: &[],
    writes: &[],
    danger: &[],
    numbers: true,
};

#[rustfmt::skip]
const JQ: Spec = Spec {
    options: &[
        "-n", "-r", "-j", "-a", "-s", "-c", "-C", "-M", "-S", "-e", "-R", "-0", "--tab",
        "--indent=", "--arg==", "--argjson==", "--args", "--jsonargs", "--seq", "--stream",
        "--stream-errors", "--raw-input", "--null-input", "--compact-output", "--raw-output",
        "--raw-output0", "--join-output", "--ascii-output", "--sort-keys", "--color-output",
        "--monochrome-output", "--exit-status", "--unbuffered", "--slurp",
    ],
    reads: &["-f=", "--from-file=", "-L=", "--slurpfile==", "--rawfile=="],
    writes: &[],
    danger: &[],
    numbers: false,
};

#[rustfmt::skip]
const BINUTILS: Spec = Spec {
    options: &[
        // nm
        "-A", "-B", "-C", "-D", "-g", "-l", "-n", "-o", "-p", "-P", "-r", "-S", "-u", "-v",
        "-V", "-X=", "-t=", "-f=", "-j", "--debug-syms", "--print-file-name", "--demangle?",
        "--no-demangle", "--dynamic", "--defined-only", "--extern-only", "--format=",
        "--line-numbers", "--numeric-sort", "--no-sort", "--portability", "--print-armap",
        "--reverse-sort", "--size-sort", "--special-syms", "--synthetic", "--radix=",
        "--target=", "--undefined-only", "--without-symbol-versions", "--quiet",
        // objdump, readelf, strings
        "-a", "-d", "-e", "-G", "-h", "-i", "-s", "-T", "-x", "-z", "-w", "-W", "-b=", "-m=",
        "-M=", "-I", "-R", "-c", "-n=", "--disassemble?", "--disassemble-all",
        "--file-headers", "--section-headers", "--section=", "--headers", "--all-headers",
        "--source", "--syms", "--dynamic-syms", "--dyn-syms", "--reloc", "--dynamic-reloc",
        "--full-contents", "--private-headers", "--wide", "--no-show-raw-insn",
        "--start-address=", "--stop-address=", "--prefix-addresses", "--architecture=",
        "--disassembler-options=", "--dwarf?", "--all", "--file-header", "--program-headers",
        "--segments", "--sections", "--section-groups", "--section-details", "--symbols",
        "--notes", "--relocs", "--unwind", "--version-info", "--arch-specific", "--histogram",
        "--hex-dump=", "--string-dump=", "--relocated-dump=", "--decompress", "--debug-dump?",
        "--data", "--bytes=", "--encoding=", "--include-all-whitespace", "--output-separator=",
    ],
    reads: &[],
    writes: &[],
    danger: &[("--plugin=", "loads a shared library")],
    numbers: true,
};

#[rustfmt::skip]
const CLOC: Spec = Spec {
    options: &[
        "--by-file", "--by-file-by-lang", "--exclude-dir=", "--exclude-lang=", "--include-lang=",
        "--include-ext=", "--exclude-ext=", "--quiet", "--json", "--yaml", "--csv", "--md",
        "--not-match-f=", "--match-f=", "--not-match-d=", "--match-d=", "--hide-rate",
        "--skip-uniqueness", "--fullpath", "--exclude-content=", "--include-content=",
        "--no-autogen", "--max-file-size=", "--timeout=", "--diff", "--follow-links",
        "--progress-rate=", "-v?", "--verbose?", "--counted=", "--ignored=", "--found=",
    ],
    reads: &["--list-file=", "--read-lang-def=", "--force-lang-def=", "--exclude-list-file="],
    writes: &["--out=", "--report-file=", "--sql=", "--write-lang-def="],
    danger: &[
        ("--vcs=", "may run a command to list files"),
        ("--extract-with=", "runs a command to unpack archives"),
        ("--script-lang==", "changes how scripts are recognised"),
    ],
    numbers: false,
};

#[rustfmt::skip]
const TREE: Spec = Spec {
    options: &[
        "-a", "-d", "-l", "-f", "-x", "-L=", "-R", "-P=", "-I=", "--gitignore", "--ignore-case",
        "--matchdirs", "--metafirst", "--prune", "--info", "--noreport", "--charset=",
        "--filelimit=", "--timefmt=", "-q", "-N", "-Q", "-p", "-u", "-g", "-s", "-h", "--si",
        "--du", "-D", "-F", "--inodes", "--device", "-v", "-t", "-c", "-U", "-r", "--dirsfirst",
        "--filesfirst", "--sort=", "-i", "-A", "-S", "-n", "-C", "-X", "-J", "-H=", "-T=",
        "--nolinks", "--hintro=", "--houtro=",
    ],
    reads: &["--fromfile?"],
    writes: &["-o="],
    danger: &[],
    numbers: false,
};

#[rustfmt::skip]
static READERS: &[Reader] = &[
    reader(&["cat", "tac", "rev", "zcat", "bzcat", "xzcat"], Spec::harmless(&[
        "-A", "-b", "-e", "-E", "-n", "-s", "-t", "-T", "-u", "-v", "-r", "-0", "--show-all",
        "--number-nonblank", "--show-ends", "--number", "--squeeze-blank", "--show-tabs",
        "--show-nonprinting", "--before", "--regex", "--separator=", "--zero", "-f", "-q",
        "--force", "--quiet",
    ]), Operands::Files),
    reader(&["head"], Spec { numbers: true, ..Spec::harmless(&[
        "-c=", "-n=", "-q", "-v", "-z", "--bytes=", "--lines=", "--quiet", "--silent",
        "--verbose", "--zero-terminated",
    ]) }, Operands::Files),
    reader(&["tail"], TAIL, Operands::Files),
    reader(&["wc"], Spec { reads: &["--files0-from="], ..Spec::harmless(&[
        "-c", "-m", "-l", "-L", "-w", "--bytes", "--chars", "--lines", "--max-line-length",
        "--words", "--total=",
    ]) }, Operands::Files),
    reader(&["nl"], Spec::harmless(&[
        "-b=", "-d=", "-f=", "-h=", "-i=", "-l=", "-n=", "-p", "-s=", "-v=", "-w=",
        "--body-numbering=", "--section-delimiter=", "--footer-numbering=",
        "--header-numbering=", "--line-increment=", "--join-blank-lines=", "--number-format=",
        "--no-renumber", "--number-separator=", "--starting-line-number=", "--number-width=",
    ]), Operands::Files),
    reader(&["cut", "paste", "fold", "fmt", "expand", "unexpand"], Spec { numbers: true,
        ..Spec::harmless(&[
        "-b=", "-c=", "-d=", "-f=", "-n", "-s", "-z", "--bytes=", "--characters=",
        "--delimiter=", "--fields=", "--complement", "--only-delimited", "--output-delimiter=",
        "--zero-terminated", "--delimiters=", "--serial", "-w=", "--spaces", "--width=",
        "-p=", "-t=", "-u", "-g=", "--crown-margin", "--prefix=", "--split-only",
        "--tagged-paragraph", "--uniform-spacing", "--goal=", "-i", "--initial", "--tabs=",
        "-a", "--all", "--first-only",
    ]) }, Operands::Files),
    reader(&["od", "hexdump"], Spec { reads: &["-f="], ..Spec::harmless(&[
        "-A=", "-j=", "-N=", "-S=", "-t=", "-v", "-w?", "-a", "-b", "-c", "-C", "-d", "-f",
        "-i", "-l", "-o", "-s=", "-x", "-e=", "-n=", "--address-radix=", "--skip-bytes=",
        "--read-bytes=", "--strings?", "--format=", "--output-duplicates", "--width?",
        "--endian=", "--traditional", "--canonical", "--length=", "--skip=", "--no-squeezing",
    ]) }, Operands::Files),
    reader(&["strings", "nm", "objdump", "readelf"], BINUTILS, Operands::Files),
    reader(&["md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum",
        "cksum", "sum"], CHECKSUM, Operands::Files),
    reader(&["base32", "base64", "basenc"], Spec::harmless(&[
        "-d", "-i", "-w=", "--decode", "--ignore-garbage", "--wrap=", "--base64", "--base64url",
        "--base32", "--base32hex", "--base16", "--base2msbf", "--base2lsbf", "--z85",
    ]), Operands::Files),
    reader(&["file"], FILE, Operands::Files),
    reader(&["stat"], Spec::harmless(&[
        "-L", "-f", "-t", "-c=", "--dereference", "--file-system", "--format=", "--printf=",
        "--terse", "--cached=",
    ]), Operands::Files),
    Reader { recursion: Recursion::Always, ..reader(&["du"], Spec {
        reads: &["-X=", "--exclude-from=", "--files0-from="],
        ..Spec::harmless(&[
        "-0", "-a", "-A", "-b", "-B=", "-c", "-D", "-d=", "-h", "-H", "-k", "-l", "-L", "-m",
        "-P", "-s", "-S", "-t=", "-x", "--null", "--all", "--apparent-size", "--block-size=",
        "--bytes", "--total", "--dereference-args", "--max-depth=", "--human-readable",
        "--inodes", "--si", "--count-links", "--dereference", "--no-dereference",
        "--separate-dirs", "--summarize", "--threshold=", "--time?", "--time-style=",
        "--exclude=", "--one-file-system",
    ]) }, Operands::FilesOrCwd) },
    Reader { recursion: Recursion::With(&["-R", "--recursive"]), ..reader(&["ls"], LS,
        Operands::FilesOrCwd) },
    Reader { recursion: Recursion::With(&["-r", "--recursive", "-N", "--new-file"]),
        ..reader(&["diff"], DIFF, Operands::Files) },
    reader(&["cmp"], Spec::harmless(&[
        "-b", "-i=", "-l", "-n=", "-s", "--print-bytes", "--ignore-initial=", "--verbose",
        "--bytes=", "--quiet", "--silent",
    ]), Operands::Files),
    reader(&["comm", "join"], Spec::harmless(&[
        "-1", "-2", "-3", "-z", "--check-order", "--nocheck-order", "--output-delimiter=",
        "--total", "--zero-terminated", "-a=", "-e=", "-i", "-j=", "-o=", "-t=", "-v=",
        "--header", "--ignore-case",
    ]), Operands::Files),
    reader(&["column"], Spec::harmless(&[
        "-t", "-s=", "-o=", "-c=", "-x", "-n", "-e", "-N=", "-R=", "-T=", "-W=", "-H=", "-O=",
        "-E=", "-d", "-J", "-r=", "-l=", "-L", "--table", "--separator=", "--output-separator=",
        "--output-width=", "--fillrows", "--table-columns=", "--table-right=",
        "--table-truncate=", "--table-wrap=", "--table-hide=", "--table-order=",
        "--table-name=", "--json", "--keep-empty-lines", "--table-noheadings",
        "--table-columns-limit=",
    ]), Operands::Files),
    reader(&["tsort"], Spec::harmless(&[]), Operands::Files),
    reader(&["look"], Spec::harmless(&["-b", "-d", "-f", "-a", "-t="]), Operands::TextThen),
    reader(&["jq"], JQ, Operands::PatternThen(&["-f", "--from-file"])),
    reader(&["shellcheck"], Spec { reads: &["-P=", "--source-path=", "--rcfile="], ..Spec::harmless(&[
        "-a", "-C?", "-e=", "-f=", "-i=", "-o=", "-s=", "-S=", "-V", "-W=", "-x",
        "--check-sourced", "--color?", "--include=", "--exclude=", "--format=", "--enable=",
        "--shell=", "--severity=", "--wiki-link-count=", "--external-sources", "--norc",
        "--list-optional", "--extended-analysis=",
    ]) }, Operands::Files),
    Reader { recursion: Recursion::Always, ..reader(&["tokei"], Spec::harmless(&[
        "-C", "-e=", "-f", "-l", "-s=", "-t=", "-V", "-v", "--columns=", "--exclude=",
        "--files", "--hidden", "--languages", "--no-ignore", "--no-ignore-parent",
        "--no-ignore-dot", "--no-ignore-vcs", "--output=", "--sort=", "--types=", "--compact",
        "--num-format=",
    ]), Operands::FilesOrCwd) },
    Reader { recursion: Recursion::Always, ..reader(&["cloc"], CLOC, Operands::Files) },
    Reader { recursion: Recursion::Always, ..reader(&["tree"], TREE, Operands::FilesOrCwd) },
    Reader {
        recursion: Recursion::With(&["-r", "-R", "--recursive", "--dereference-recursive"]),
        ..reader(&["grep", "egrep", "fgrep", "zgrep"], GREP,
            Operands::PatternThen(&["-e", "--regexp", "-f", "--file"]))
    },
    Reader { recursion: Recursion::Always, ..reader(&["rg"], RG,
        Operands::PatternThen(&["-e", "--regexp", "-f", "--file", "--files", "--type-list"])) },
    reader(&["sort"], SORT, Operands::Files),
    reader(&["shuf"], Spec {
        reads: &["--random-source="],
        writes: &["-o=", "--output="],
        ..Spec::harmless(&["-e", "-i=", "-n=", "-r", "-z", "--echo", "--input-range=", "--head-count=",
            "--repeat", "--zero-terminated"])
    }, Operands::Files),
    reader(&["iconv"], Spec { writes: &["-o=", "--output="], ..Spec::harmless(&[
        "-f=", "-t=", "-c", "-l", "-s", "--from-code=", "--to-code=", "--list", "--silent",
    ]) }, Operands::Files),
    reader(&["man"], MAN, Operands::Text),
];
