//! What the classifier cannot resolve or see: a table pinning class, the unresolved-write
//! flag and completeness — CDPATH and the directory stack make the working directory
//! unknown, computed write targets are unresolved, programs the parser cannot see make the
//! command incomplete, launchers are unwrapped, package installs are unknown.
//! (command, class, unresolved write, complete)

use super::ShellClass::{self, Benign, Destructive, ReadOnly, Unknown};
use super::tests::run;

const UNRESOLVED: &[(&str, ShellClass, bool, bool)] = &[
    // CDPATH, `cd -`, the directory stack
    ("CDPATH=/outside cd dir && echo x > f", Unknown, true, true),
    (
        "export CDPATH=/outside; cd dir && echo x > f",
        Unknown,
        true,
        true,
    ),
    ("CDPATH=/outside; cd dir; touch f", Unknown, true, true),
    (
        "export CDPATH=/o; cd ./dir && echo x > f",
        Benign,
        false,
        true,
    ),
    (
        "export CDPATH=/o; cd /ws/dir && echo x > f",
        Benign,
        false,
        true,
    ),
    ("cd dir && echo x > f", Benign, false, true),
    ("cd - && echo x > f", Unknown, true, true),
    ("pushd dir && echo x > f", Unknown, true, true),
    ("pushd dir; popd; touch f", Unknown, true, true),
    ("cd - ; ls", ReadOnly, false, true),
    // unresolvable write and delete targets
    ("rm -rf \"$(pwd)/../outside/zz\"", Destructive, true, true),
    ("rm -rf ${X:-/outside/zz}", Destructive, true, true),
    ("D=..; rm -rf $D/outside/zz", Destructive, true, true),
    ("rm -rf `echo ..`/outside/zz", Destructive, true, true),
    ("D=/outside; echo pwned > $D/h", Unknown, true, true),
    ("rm -f $F", Unknown, true, true),
    ("touch \"$NAME\"", Unknown, true, true),
    ("echo x > \"$(mktemp)\"", Unknown, true, true),
    ("rm -rf build2", Destructive, false, true),
    ("echo x > out.txt", Benign, false, true),
    // programs the parser cannot see
    ("T=touch; $T a", Unknown, false, false),
    ("echo touch a | bash", Unknown, false, false),
    ("bash <<< \"touch a\"", Unknown, false, false),
    ("bash < script.sh", Unknown, false, false),
    ("sh -s < script.sh", Unknown, false, false),
    ("eval \"$X\"", Unknown, false, false),
    ("bash -c \"$X\"", Unknown, false, false),
    ("bash script.sh", Unknown, false, true),
    // more wrappers, unwrapped
    ("env -S \"touch a\"", Benign, false, true),
    ("env -S 'rm -rf /outside/x'", Destructive, false, true),
    ("env -S \"$X\"", Unknown, false, false),
    ("flock F touch a", Benign, false, true),
    ("flock /tmp/lock touch a", Destructive, false, true),
    ("flock -w 5 F -c 'rm -rf x'", Destructive, false, true),
    ("flock 9", ReadOnly, false, true),
    ("ionice -c 3 touch a", Benign, false, true),
    ("ionice -c 3 rm -rf x", Destructive, false, true),
    ("ionice -p 1", Unknown, false, true),
    ("chroot / touch a", Destructive, true, true),
    ("setpriv --reuid=1000 ls", Unknown, false, true),
    ("taskset -c 0 rm -rf x", Destructive, false, true),
    ("chrt 5 touch a", Benign, false, true),
    // package managers run lifecycle scripts
    ("npm install", Unknown, false, true),
    ("npm i", Unknown, false, true),
    ("pnpm install --frozen-lockfile", Unknown, false, true),
    ("yarn add react", Unknown, false, true),
    ("bun add x", Unknown, false, true),
    ("npx cowsay hi", Unknown, false, true),
    ("npm run build", Benign, false, true),
    ("npm ci", Unknown, false, true),
    ("bun update", Unknown, false, true),
    ("npm test", Benign, false, true),
    ("npm ls", ReadOnly, false, true),
];

#[test]
fn unresolved_and_incomplete_table() {
    let failures: Vec<String> = UNRESOLVED
        .iter()
        .filter_map(|(command, class, unresolved, complete)| {
            let got = run(command);
            let ok = got.class == *class
                && got.unresolved_write == *unresolved
                && got.complete == *complete;
            (!ok).then(|| {
                format!(
                    "{command:?}: want {class:?} unresolved={unresolved} complete={complete}, got \
                     {:?} unresolved={} complete={} ({})",
                    got.class, got.unresolved_write, got.complete, got.reason
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
