//! `sed`: read-only unless it edits in place (`-i`) or its script writes files (`w`, `W`,
//! the `w` flag of `s`) or runs commands (`e`, the `e` flag of `s`). The script is scanned
//! with a small GNU-sed command reader; anything it does not recognise is unknown.

use super::ShellClass;
use super::argspec::Arg;
use super::rules::{ReadFrom, Verdict};
use super::words::Word;

pub(super) fn classify<'a>(args: &'a [Word], scope: &str) -> Verdict<'a> {
    let unknown = |why: &str| Verdict::new(ShellClass::Unknown, scope, why.to_owned());
    let mut scripts: Vec<&str> = Vec::new();
    let mut in_place = false;
    let mut sandbox = false;
    let mut iter = args.iter();
    let mut rest: Vec<&Word> = Vec::new();
    while let Some(arg) = iter.next() {
        let Some(text) = arg.text() else {
            return unknown("arguments expand at run time");
        };
        if let Some(long) = text.strip_prefix("--") {
            let (name, value) = long.split_once('=').unwrap_or((long, ""));
            match name {
                "" => {
                    rest.extend(iter.by_ref());
                    break;
                }
                "in-place" => in_place = true,
                "sandbox" => sandbox = true,
                "expression" if !value.is_empty() => scripts.push(value),
                "expression" => match iter.next().and_then(Word::text) {
                    Some(s) => scripts.push(s),
                    None => return unknown("script expands at run time"),
                },
                "file" => return unknown("script read from a file"),
                "quiet" | "silent" | "regexp-extended" | "separate" | "unbuffered"
                | "null-data" | "posix" | "debug" | "follow-symlinks" | "line-length"
                | "zero-terminated" => {}
                _ => return unknown("unknown option"),
            }
        } else if let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (i, c) in cluster.char_indices() {
                let tail = &cluster[i + c.len_utf8()..];
                match c {
                    'n' | 'E' | 'r' | 's' | 'u' | 'z' => {}
                    'i' => {
                        in_place = true;
                        break; // the rest is the backup suffix
                    }
                    'e' => {
                        if tail.is_empty() {
                            match iter.next().and_then(Word::text) {
                                Some(s) => scripts.push(s),
                                None => return unknown("script expands at run time"),
                            }
                        } else {
                            scripts.push(tail);
                        }
                        break;
                    }
                    'l' => {
                        if tail.is_empty() {
                            iter.next();
                        }
                        break;
                    }
                    'f' => return unknown("script read from a file"),
                    _ => return unknown("unknown option"),
                }
            }
        } else {
            rest.push(arg);
        }
    }
    let files: Vec<&Word> = if scripts.is_empty() {
        match rest.split_first() {
            Some((script, files)) => {
                match script.text() {
                    Some(s) => scripts.push(s),
                    None => return unknown("script expands at run time"),
                }
                files.to_vec()
            }
            None => return unknown("no script"),
        }
    } else {
        rest
    };
    let mut reads: Vec<ReadFrom<'a>> = files.iter().map(|w| ReadFrom::Arg(Arg::Word(w))).collect();
    // `--sandbox` refuses `e`, `w` and `r` at run time.
    for script in scripts.iter().filter(|_| !sandbox) {
        match check_script(script) {
            Err(why) => return Verdict::new(ShellClass::Unknown, scope, why),
            Ok(read) => reads.extend(read.into_iter().map(|f| ReadFrom::Arg(Arg::Inline(f)))),
        }
    }
    let verdict = if in_place {
        Verdict::new(ShellClass::Benign, scope, "edits files in place").writing(files)
    } else {
        Verdict::new(ShellClass::ReadOnly, scope, "read-only")
    };
    verdict.reading(reads)
}

/// Accepts sed scripts made only of commands that read and print; returns the files its
/// `r`/`R` commands read.
pub(super) fn check_script(script: &str) -> Result<Vec<String>, &'static str> {
    let mut s = Scanner {
        chars: script.chars().collect(),
        pos: 0,
    };
    let mut reads = Vec::new();
    loop {
        s.skip(|c| c.is_whitespace() || c == ';');
        let Some(_) = s.peek() else { return Ok(reads) };
        if s.address()? {
            s.skip(char::is_whitespace);
            if s.peek() == Some(',') {
                s.pos += 1;
                s.skip(char::is_whitespace);
                if !s.address()? && !s.relative() {
                    return Err("bad address");
                }
            }
        }
        s.skip(char::is_whitespace);
        if s.peek() == Some('!') {
            s.pos += 1;
            s.skip(char::is_whitespace);
        }
        let Some(cmd) = s.next() else {
            return Err("missing command");
        };
        match cmd {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'l' | 'q' | 'Q' | 'L' => s.skip(|c| c.is_ascii_digit() || c == ' '),
            '#' | ':' | 'b' | 't' | 'T' | 'v' => s.skip(|c| c != '\n' && c != ';'),
            // Text and file names run to the end of the line.
            'a' | 'i' | 'c' => s.skip(|c| c != '\n'),
            'r' | 'R' => {
                s.skip(|c| c == ' ' || c == '\t');
                let start = s.pos;
                s.skip(|c| c != '\n');
                let file: String = s
                    .chars
                    .get(start..s.pos)
                    .unwrap_or_default()
                    .iter()
                    .collect();
                if !file.is_empty() {
                    reads.push(file);
                }
            }
            'w' | 'W' => return Err("the sed script writes a file"),
            'e' => return Err("the sed script runs a command"),
            's' => {
                let delim = s.next().ok_or("unterminated s command")?;
                s.until(delim)?;
                s.until(delim)?;
                while let Some(flag) = s.peek() {
                    match flag {
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => s.pos += 1,
                        'w' => return Err("the sed script writes a file"),
                        'e' => return Err("the sed script runs a command"),
                        _ => break,
                    }
                }
            }
            'y' => {
                let delim = s.next().ok_or("unterminated y command")?;
                s.until(delim)?;
                s.until(delim)?;
            }
            _ => return Err("unsupported sed command"),
        }
        s.skip(|c| c == ' ' || c == '\t');
        match s.peek() {
            None | Some(';' | '\n' | '}') => {}
            Some(_) => return Err("unexpected text after a sed command"),
        }
    }
}

struct Scanner {
    chars: Vec<char>,
    pos: usize,
}

impl Scanner {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn skip(&mut self, keep_going: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep_going) {
            self.pos += 1;
        }
    }

    /// Consumes up to and including an unescaped `delim`.
    fn until(&mut self, delim: char) -> Result<(), &'static str> {
        while let Some(c) = self.next() {
            if c == '\\' {
                self.pos += 1;
            } else if c == delim {
                return Ok(());
            }
        }
        Err("unterminated sed expression")
    }

    /// A line number, `$`, `first~step`, `/re/` or `\cREc` (with `I`/`M` flags).
    fn address(&mut self) -> Result<bool, &'static str> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                self.skip(|c| c.is_ascii_digit() || c == '~');
                Ok(true)
            }
            Some('$') => {
                self.pos += 1;
                Ok(true)
            }
            Some('/') => {
                self.pos += 1;
                self.until('/')?;
                self.skip(|c| c == 'I' || c == 'M');
                Ok(true)
            }
            Some('\\') => {
                self.pos += 1;
                let delim = self.next().ok_or("bad address")?;
                self.until(delim)?;
                self.skip(|c| c == 'I' || c == 'M');
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// GNU `addr,+N` / `addr,~N`.
    fn relative(&mut self) -> bool {
        if matches!(self.peek(), Some('+' | '~')) {
            self.pos += 1;
            self.skip(|c| c.is_ascii_digit());
            true
        } else {
            false
        }
    }
}
