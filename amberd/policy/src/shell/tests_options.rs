//! Table-driven: every option of a read-only or benign program that runs a program, loads
//! code or writes elsewhere, with a concrete command line and its class; the everyday
//! commands that must stay read-only or benign; unknown options; and the paths each
//! command reads.

use std::path::PathBuf;

use super::ShellClass::{Benign, Destructive, ReadOnly, Unknown};
use super::tests::run;
use super::{ReadPath, ShellClass};

/// (program family, command, class): the dangerous options.
const DANGEROUS: &[(&str, &str, ShellClass)] = &[
    // git: global options
    ("git", "git -c core.pager=evil log", Unknown),
    ("git", "git -c diff.external=evil diff", Unknown),
    ("git", "git --exec-path=/tmp/x status", Unknown),
    ("git", "git --exec-path /tmp/x status", Unknown),
    ("git", "git --config-env=core.pager=X log", Unknown),
    ("git", "git -p log", Unknown),
    ("git", "git --paginate log", Unknown),
    // git: read-only subcommands
    ("git", "git grep -O'touch x' hello", Unknown),
    ("git", "git grep -Oevil hello", Unknown),
    ("git", "git grep -nO hello", Unknown),
    ("git", "git grep --open-files-in-pager=evil hello", Unknown),
    ("git", "git grep --open-files-in-pager hello", Unknown),
    ("git", "git grep --open hello", Unknown),
    ("git", "git grep --textconv hello", Unknown),
    ("git", "git diff --ext-diff", Unknown),
    ("git", "git diff --textconv HEAD", Unknown),
    ("git", "git log -p --ext-diff", Unknown),
    ("git", "git show --ext-diff HEAD", Unknown),
    ("git", "git show --textconv HEAD:a", Unknown),
    ("git", "git blame --textconv a.rs", Unknown),
    ("git", "git cat-file --textconv HEAD:a", Unknown),
    ("git", "git cat-file --filters HEAD:a", Unknown),
    ("git", "git stash show -p --ext-diff", Unknown),
    ("git", "git reflog show --ext-diff -p", Unknown),
    ("git", "git ls-remote --upload-pack=evil origin", Unknown),
    ("git", "git ls-remote -u evil origin", Unknown),
    ("git", "git help --web log", Unknown),
    ("git", "git difftool", Unknown),
    ("git", "git mergetool", Unknown),
    ("git", "git diff --output=/tmp/x", Destructive),
    // git: benign subcommands
    ("git", "git fetch --upload-pack=evil origin", Unknown),
    ("git", "git fetch --upload=evil origin", Unknown),
    ("git", "git pull --upload-pack evil", Unknown),
    ("git", "git clone -u evil url dir", Unknown),
    ("git", "git clone --upload-pack=evil url dir", Unknown),
    ("git", "git clone --template=/tmp/t url dir", Unknown),
    ("git", "git clone -c core.fsmonitor=evil url dir", Unknown),
    ("git", "git init --template=/tmp/t", Unknown),
    ("git", "git archive --remote=x --exec=evil HEAD", Unknown),
    ("git", "git rebase --exec 'make' main", Unknown),
    ("git", "git rebase -x make main", Unknown),
    ("git", "git rebase -i main", Unknown),
    ("git", "git bisect run make", Unknown),
    ("git", "git maintenance start", Unknown),
    ("git", "git submodule foreach 'rm x'", Unknown),
    ("git", "git config core.pager evil", Unknown),
    // git: environment
    ("git", "GIT_PAGER=evil git log", Unknown),
    ("git", "PAGER=evil git log", Unknown),
    ("git", "GIT_EXTERNAL_DIFF=evil git diff", Unknown),
    ("git", "GIT_SSH_COMMAND=evil git fetch", Unknown),
    ("git", "LESSOPEN='|evil %s' git log", Unknown),
    ("git", "export GIT_EXTERNAL_DIFF=evil; git diff", Unknown),
    // tar
    ("tar", "tar -xf - --to-command='touch x'", Unknown),
    ("tar", "tar -xf a.tar --to-command 'touch x'", Unknown),
    ("tar", "tar -I evil -cf a.tar src", Unknown),
    ("tar", "tar -Ievil -cf a.tar src", Unknown),
    ("tar", "tar --use-compress-program=evil -xf a.tar", Unknown),
    ("tar", "tar xIf evil a.tar", Unknown),
    (
        "tar",
        "tar -cf a.tar --checkpoint=1 --checkpoint-action=exec=evil src",
        Unknown,
    ),
    ("tar", "tar -F evil -cf a.tar src", Unknown),
    ("tar", "tar --info-script=evil -cf a.tar src", Unknown),
    ("tar", "tar --new-volume-script=evil -cf a.tar src", Unknown),
    ("tar", "tar --rmt-command=evil -cf a.tar src", Unknown),
    ("tar", "tar --rsh-command=evil -cf host:a.tar src", Unknown),
    ("tar", "tar -cf host:a.tar src", Unknown),
    ("tar", "tar -cf a.tar --remove-files src", Unknown),
    ("tar", "tar --to-com=evil -xf a.tar", Unknown),
    ("tar", "tar -xf a.tar -C /tmp/x", Destructive),
    // rg
    ("rg", "rg --pre ./decode.sh foo", Unknown),
    ("rg", "rg --pre=./decode.sh foo", Unknown),
    ("rg", "rg --hostname-bin evil foo", Unknown),
    ("rg", "rg --hostname-bin=evil foo", Unknown),
    ("rg", "rg --hostname evil foo", Unknown),
    ("rg", "RIPGREP_CONFIG_PATH=/tmp/rc rg foo", Unknown),
    // sort and friends
    ("sort", "sort --compress-program=evil f", Unknown),
    ("sort", "sort --compress-program evil f", Unknown),
    ("sort", "sort --compress=evil f", Unknown),
    ("sort", "sort -o /tmp/out f", Destructive),
    ("sort", "shuf -o /tmp/out f", Destructive),
    ("sort", "iconv -f utf8 -t ascii -o /tmp/out f", Destructive),
    ("tree", "tree -o /tmp/out", Destructive),
    // other readers
    ("file", "file -C -m magic", Unknown),
    ("nm", "nm --plugin /tmp/evil.so a.o", Unknown),
    ("objdump", "objdump --plugin=/tmp/evil.so -d a.o", Unknown),
    ("cloc", "cloc --vcs='evil' .", Unknown),
    ("cloc", "cloc --extract-with='evil >FILE<' a.tgz", Unknown),
    ("man", "man -P evil ls", Unknown),
    ("man", "man --pager=evil ls", Unknown),
    ("man", "man -Hfirefox ls", Unknown),
    ("man", "man --html=evil ls", Unknown),
    ("man", "man -p evil ls", Unknown),
    ("man", "man -C /tmp/conf ls", Unknown),
    ("man", "MANPAGER=evil man ls", Unknown),
    ("pagers", "less README.md", Unknown),
    ("pagers", "more README.md", Unknown),
    ("pagers", "most README.md", Unknown),
    ("hash", "hash -p /tmp/evil ls; ls", Unknown),
    ("shopt", "shopt -s expand_aliases", Unknown),
    ("ps", "ps eww", Unknown),
    // find, xargs, env, sed, awk, tee, dd
    ("find", "find . -exec sh -c 'rm x' \\;", Benign),
    ("find", "find . -execdir touch {} +", Unknown),
    ("find", "find . -ok rm {} \\;", Destructive),
    ("find", "find . -delete", Destructive),
    ("find", "find . -fprint /tmp/list", Destructive),
    ("find", "find . -fls /tmp/list", Destructive),
    ("find", "find . -fprintf /tmp/list '%p'", Destructive),
    ("find", "find . -frobnicate", Unknown),
    ("xargs", "xargs sh -c 'rm x'", Benign),
    ("xargs", "ls | xargs rm", Destructive),
    ("xargs", "xargs -a list touch", Unknown),
    ("env", "env -S 'touch x'", Benign),
    ("env", "env PATH=/tmp ls", Unknown),
    ("sed", "sed 'e touch x' f", Unknown),
    ("sed", "sed 's/a/b/e' f", Unknown),
    ("sed", "sed 'w /tmp/x' f", Unknown),
    ("sed", "sed 's/a/b/w /tmp/x' f", Unknown),
    ("sed", "sed -i s/a/b/ /tmp/f", Destructive),
    ("sed", "sed --frobnicate p f", Unknown),
    ("awk", "awk 'BEGIN { system(\"touch x\") }'", Unknown),
    ("awk", "awk '{ print | \"sh\" }' f", Unknown),
    ("tee", "tee /tmp/x < f", Destructive),
    ("dd", "dd if=a of=b", Destructive),
    ("dd", "dd if=a of=/tmp/b", Destructive),
    // unknown options of known readers ask
    ("unknown option", "cat --frobnicate f", Unknown),
    ("unknown option", "ls --frobnicate", Unknown),
    ("unknown option", "grep --frobnicate x f", Unknown),
    ("unknown option", "head -Q f", Unknown),
    ("unknown option", "rg --frobnicate x", Unknown),
    ("unknown option", "git log --frobnicate", Unknown),
    ("unknown option", "git status --frobnicate", Unknown),
    ("unknown option", "git grep --frobnicate x", Unknown),
    ("unknown option", "git --frobnicate status", Unknown),
    ("unknown option", "tar --frobnicate -tf a.tar", Unknown),
    ("unknown option", "diff --frobnicate a b", Unknown),
    ("expands", "rg $FLAGS foo", Unknown),
    ("expands", "grep \"$X\" f", Unknown),
    ("expands", "git log $X", Unknown),
    ("expands", "tar $X a.tar", Unknown),
];

/// Everyday commands that must stay read-only (or benign: they write the workspace).
const EVERYDAY: &[(&str, ShellClass)] = &[
    ("git status", ReadOnly),
    ("git status -sb", ReadOnly),
    ("git log --oneline -n 5", ReadOnly),
    ("git log -5 --stat --format='%h %s'", ReadOnly),
    ("git log -p --no-ext-diff -- src", ReadOnly),
    ("git diff HEAD~1 -- src", ReadOnly),
    ("git diff --cached --stat", ReadOnly),
    ("git diff --no-ext-diff --name-only main...HEAD", ReadOnly),
    ("git show HEAD:Cargo.toml", ReadOnly),
    ("git show --stat HEAD", ReadOnly),
    ("git grep -n TODO -- src", ReadOnly),
    ("git grep -e foo --and -e bar", ReadOnly),
    ("git blame -L 10,20 src/lib.rs", ReadOnly),
    ("git rev-parse --show-toplevel", ReadOnly),
    ("git ls-files -z", ReadOnly),
    ("git describe --tags --always", ReadOnly),
    ("git --no-pager log --oneline", ReadOnly),
    ("git -C sub status --short", ReadOnly),
    ("git stash show -p", ReadOnly),
    ("git reflog -n 5", ReadOnly),
    ("git --version", ReadOnly),
    ("git shortlog -sn", ReadOnly),
    ("git log --all --graph --decorate --oneline", ReadOnly),
    (
        "git log -S foo --since='2 weeks ago' --name-status",
        ReadOnly,
    ),
    ("git diff -U0 --word-diff=color HEAD~1..HEAD", ReadOnly),
    ("git status --porcelain=v1 -uno", ReadOnly),
    ("git rev-parse --abbrev-ref HEAD", ReadOnly),
    ("git show -s --format=%H -1", ReadOnly),
    ("git fetch origin", Benign),
    ("git clone https://example.com/r.git r", Benign),
    ("git rebase main", Benign),
    ("rg -n foo src", ReadOnly),
    ("rg -t rust -g '*.rs' --hidden foo", ReadOnly),
    ("rg --files", ReadOnly),
    ("rg -uu -e foo -e bar", ReadOnly),
    ("grep -rn x .", ReadOnly),
    ("grep -rnE 'a|b' --include='*.rs' src", ReadOnly),
    ("grep -c -5 x f", ReadOnly),
    ("ls -la", ReadOnly),
    ("ls -1 --color=never src", ReadOnly),
    ("find . -name '*.rs'", ReadOnly),
    ("find src -type f -newer Cargo.toml -print0", ReadOnly),
    (
        "find . -maxdepth 2 -name '*.rs' -exec grep -l TODO {} +",
        ReadOnly,
    ),
    ("sed -n 1,20p f", ReadOnly),
    ("cat a b", ReadOnly),
    ("cat -n src/main.rs", ReadOnly),
    ("head -n 5 f", ReadOnly),
    ("head -5 f", ReadOnly),
    ("tail -n +3 f", ReadOnly),
    ("wc -l f", ReadOnly),
    ("sort -u f", ReadOnly),
    ("sort -t: -k2,2n f", ReadOnly),
    ("uniq -c f", ReadOnly),
    ("cut -d: -f1 f", ReadOnly),
    ("diff -u a b", ReadOnly),
    ("diff -ru a b", ReadOnly),
    ("jq -r '.name' package.json", ReadOnly),
    ("du -sh target", ReadOnly),
    ("stat -c %s f", ReadOnly),
    ("file src/main.rs", ReadOnly),
    ("tar -tf x.tar", ReadOnly),
    ("tar tzvf x.tgz", ReadOnly),
    ("tar -xzf x.tgz", Benign),
    ("tar xf x.tar -C out", Benign),
    ("tar -czf out.tgz src", Benign),
    ("tar czf out.tgz src", Benign),
    ("man ls", ReadOnly),
    ("man -k socket", ReadOnly),
    ("echo hi | tee out.txt", Benign),
    ("fd -e rs", ReadOnly),
    ("tree -L 2", ReadOnly),
    ("cat <(ls src)", ReadOnly),
];

#[test]
fn dangerous_options_are_not_read_only() {
    let failures: Vec<String> = DANGEROUS
        .iter()
        .filter_map(|(family, command, want)| {
            let got = run(command);
            (got.class != *want).then(|| {
                format!(
                    "[{family}] {command:?}: want {want:?}, got {:?} ({})",
                    got.class, got.reason
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn everyday_commands_stay_read_only_or_benign() {
    let failures: Vec<String> = EVERYDAY
        .iter()
        .filter_map(|(command, want)| {
            let got = run(command);
            (got.class != *want).then(|| {
                format!(
                    "{command:?}: want {want:?}, got {:?} ({})",
                    got.class, got.reason
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn abs(p: &str) -> ReadPath {
    ReadPath::Absolute(PathBuf::from(p))
}

#[test]
fn read_paths_are_exposed() {
    let home = |p: &str| ReadPath::Home(PathBuf::from(p));
    let cases: &[(&str, &[ReadPath])] = &[
        ("cat /etc/passwd", &[abs("/etc/passwd")]),
        ("cat a ../b", &[abs("/ws/a"), abs("/b")]),
        ("head -n 5 -- -x", &[abs("/ws/-x")]),
        ("grep -rn foo src /opt", &[abs("/ws/src"), abs("/opt")]),
        ("grep -e foo /etc/hosts", &[abs("/etc/hosts")]),
        (
            "grep -f /etc/patterns f",
            &[abs("/ws/f"), abs("/etc/patterns")],
        ),
        ("grep foo", &[]),
        ("grep -r foo", &[abs("/ws")]),
        ("rg foo", &[abs("/ws")]),
        ("rg foo /srv", &[abs("/srv")]),
        ("ls", &[abs("/ws")]),
        ("ls /usr/include", &[abs("/usr/include")]),
        ("cd /tmp && ls", &[abs("/tmp")]),
        ("find /var -name x", &[abs("/var")]),
        ("find -name x", &[abs("/ws")]),
        ("diff a /etc/b", &[abs("/ws/a"), abs("/etc/b")]),
        ("wc -l < /etc/shadow", &[abs("/etc/shadow")]),
        ("cat ~/.ssh/id_rsa", &[home(".ssh/id_rsa")]),
        (
            "cat \"$HOME/.aws/credentials\"",
            &[home(".aws/credentials")],
        ),
        ("grep -r key ~", &[home("")]),
        ("cat ~other/x", &[ReadPath::Unknown]),
        ("cd ~ && cat .ssh/id_rsa", &[home(".ssh/id_rsa")]),
        ("cd && ls", &[home("")]),
        ("cd ~/.aws && cat ../.ssh/x", &[home(".ssh/x")]),
        ("cd ~ && cat ../x", &[ReadPath::Unknown]),
        ("cat *.txt", &[abs("/ws")]),
        ("cat /etc/*", &[abs("/etc")]),
        ("cat .*", &[ReadPath::Unknown]),
        ("cat /dev/null -", &[]),
        ("git -C /srv/repo status", &[abs("/srv/repo")]),
        ("git status", &[abs("/ws")]),
        (
            "git diff --no-index /etc/a b",
            &[abs("/ws"), abs("/etc/a"), abs("/ws/b")],
        ),
        ("tar -tf /tmp/x.tar", &[abs("/tmp/x.tar")]),
        ("tar -czf out.tgz /etc", &[abs("/etc")]),
        ("sed -n p /etc/f", &[abs("/etc/f")]),
        ("sed 'r /etc/shadow' f", &[abs("/ws/f"), abs("/etc/shadow")]),
        ("echo /etc/x | xargs cat", &[ReadPath::Unknown]),
        ("jq . /etc/x.json", &[abs("/etc/x.json")]),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(command, want)| {
            let mut got: Vec<String> = run(command)
                .reads
                .into_iter()
                .map(|r| format!("{:?}", r.path))
                .collect();
            let mut wanted: Vec<String> = want.iter().map(|p| format!("{p:?}")).collect();
            got.sort();
            wanted.sort();
            (got != wanted).then(|| format!("{command:?}: want {wanted:?}, got {got:?}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Recursive readers say so.
    let recursive = |c: &str| run(c).reads.iter().all(|r| r.recursive);
    assert!(recursive("grep -r x ~") && recursive("rg x") && recursive("find ~"));
    assert!(!recursive("cat ~/x") && !recursive("grep x ~/y"));
}
