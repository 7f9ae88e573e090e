//! Tests of `beneath.rs`: every way a path could lead a restore out of the workspace or into
//! a protected directory, with both resolvers, and a directory swapped for a symlink while
//! writes run.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::beneath::{BeneathError, Refusal, Resolver, Tree, protected};
use super::path::RelPath;

/// Each resolver this kernel offers (`openat2` may be missing or filtered).
fn resolvers() -> Vec<Resolver> {
    let mut all = vec![Resolver::PerComponent];
    if Tree::open_with(Path::new("/"), Resolver::Openat2)
        .and_then(|t| {
            t.dir(Some(&RelPath::from("tmp")))
                .map_err(std::io::Error::other)
        })
        .is_ok()
    {
        all.push(Resolver::Openat2);
    }
    all
}

/// A workspace and, beside it, a directory outside it holding a sentinel file.
struct Scene {
    _tmp: tempfile::TempDir,
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
}

impl Scene {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(ws.join("real")).unwrap();
        fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("sentinel"), "outside\n").unwrap();
        fs::write(ws.join("file"), "a file\n").unwrap();
        symlink(&outside, ws.join("out")).unwrap();
        symlink(ws.join(".git"), ws.join("gitlink")).unwrap();
        symlink("../outside", ws.join("rel_out")).unwrap();
        fs::create_dir_all(ws.join("a")).unwrap();
        symlink(&outside, ws.join("a/link")).unwrap();
        Self {
            _tmp: tmp,
            ws,
            outside,
        }
    }

    /// What is outside the workspace, and in its `.git`: only what the scene put there.
    fn assert_untouched(&self) {
        let mut names: Vec<_> = fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["sentinel"], "something was written outside");
        assert_eq!(
            fs::read_to_string(self.outside.join("sentinel")).unwrap(),
            "outside\n"
        );
        let hooks: Vec<_> = fs::read_dir(self.ws.join(".git/hooks")).unwrap().collect();
        assert!(hooks.is_empty(), "something was written in .git/hooks");
        assert_eq!(
            fs::read_dir(self.ws.join(".git")).unwrap().count(),
            1,
            "something was written in .git"
        );
    }
}

fn refusal(err: BeneathError) -> Refusal {
    match err {
        BeneathError::Refused(r) => r,
        BeneathError::Io(e) => panic!("an I/O error, not a refusal: {e}"),
    }
}

fn rel(bytes: &str) -> RelPath {
    RelPath::from_bytes(bytes.as_bytes().to_vec())
}

/// A write, a mkdir and a delete of `path` are each refused with `expected`.
fn assert_refused(tree: &Tree, path: &str, expected: &Refusal) {
    let path = rel(path);
    let write = tree.parent_of(&path).and_then(|(dir, name)| {
        dir.write_file(&name, b"planted\n", 0o755)
            .map_err(Into::into)
    });
    assert_eq!(&refusal(write.unwrap_err()), expected, "write {path}");
    assert_eq!(
        &refusal(tree.make_dirs(&path).unwrap_err()),
        expected,
        "mkdir {path}"
    );
    let delete = tree
        .parent_of(&path)
        .and_then(|(dir, name)| dir.remove_file(&name).map_err(Into::into));
    assert_eq!(&refusal(delete.unwrap_err()), expected, "delete {path}");
}

#[test]
fn nothing_is_written_through_a_link_a_file_or_out_of_the_tree() {
    let symlink_at = |at: &str| Refusal::Symlink { at: rel(at) };
    let cases: &[(&str, Refusal)] = &[
        // A symlinked parent: absolute, relative, into .git, deeper down.
        ("out/f", symlink_at("out")),
        ("out/sub/f", symlink_at("out")),
        ("rel_out/f", symlink_at("rel_out")),
        ("gitlink/hooks/post-checkout", symlink_at("gitlink")),
        ("a/link/f", symlink_at("a/link")),
        // A file where a directory should be.
        ("file/f", Refusal::NotADirectory { at: rel("file") }),
        // Not a plain relative path.
        ("../outside/f", Refusal::Invalid),
        ("real/../../outside/f", Refusal::Invalid),
        ("/tmp/f", Refusal::Invalid),
        ("real//f", Refusal::Invalid),
        ("./real/f", Refusal::Invalid),
        // Protected, at any depth and in any case.
        (".git/hooks/post-checkout", Refusal::Protected),
        (".git/config", Refusal::Protected),
        ("sub/.git/config", Refusal::Protected),
        (".GIT/config", Refusal::Protected),
        (".amber/rules.toml", Refusal::Protected),
    ];
    for resolver in resolvers() {
        let scene = Scene::new();
        let tree = Tree::open_with(&scene.ws, resolver).unwrap();
        for (path, expected) in cases {
            assert_refused(&tree, path, expected);
        }
        scene.assert_untouched();
        assert!(
            !scene.ws.join("sub").exists(),
            "{resolver:?} made a directory"
        );
    }
}

#[test]
fn a_symlink_in_the_leaf_is_replaced_never_written_through() {
    for resolver in resolvers() {
        let scene = Scene::new();
        let tree = Tree::open_with(&scene.ws, resolver).unwrap();
        symlink(scene.outside.join("sentinel"), scene.ws.join("real/leaf")).unwrap();
        let (dir, name) = tree.parent_of(&rel("real/leaf")).unwrap();
        dir.write_file(&name, b"restored\n", 0o6755).unwrap();
        let leaf = scene.ws.join("real/leaf");
        assert!(!fs::symlink_metadata(&leaf).unwrap().is_symlink());
        assert_eq!(fs::read_to_string(&leaf).unwrap(), "restored\n");
        // Set-id bits never come back from a checkpoint.
        let mode = fs::metadata(&leaf).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{resolver:?}");

        // Deleting a symlink deletes the link, not its target.
        symlink(scene.outside.join("sentinel"), scene.ws.join("real/leaf2")).unwrap();
        let (dir, name) = tree.parent_of(&rel("real/leaf2")).unwrap();
        dir.remove_file(&name).unwrap();
        scene.assert_untouched();
    }
}

#[test]
fn plain_paths_are_written_created_and_deleted_beneath_the_root() {
    for resolver in resolvers() {
        let scene = Scene::new();
        let tree = Tree::open_with(&scene.ws, resolver).unwrap();
        tree.make_dirs(&rel("new/deep/dir")).unwrap();
        let (dir, name) = tree.parent_of(&rel("new/deep/dir/f.txt")).unwrap();
        dir.write_file(&name, b"hello\n", 0o644).unwrap();
        dir.write_symlink(b"l", b"f.txt").unwrap();
        let at = scene.ws.join("new/deep/dir");
        assert_eq!(fs::read_to_string(at.join("f.txt")).unwrap(), "hello\n");
        assert_eq!(fs::read_link(at.join("l")).unwrap(), Path::new("f.txt"));
        let mut names = dir.names().unwrap();
        names.sort();
        assert_eq!(
            names,
            [b"f.txt".to_vec(), b"l".to_vec()],
            "no temp file left"
        );
        dir.remove_file(b"f.txt").unwrap();
        assert!(!at.join("f.txt").exists());
        let (parent, name) = tree.parent_of(&rel("new/deep/dir")).unwrap();
        assert!(parent.is_dir(&name));
        assert!(parent.remove_dir(&name).is_err(), "not empty yet");
        dir.remove_file(b"l").unwrap();
        parent.remove_dir(&name).unwrap();
        assert!(!at.exists());
    }
}

#[test]
fn only_git_and_amber_components_are_protected() {
    for (path, expected) in [
        (".git", true),
        (".git/hooks/pre-commit", true),
        ("vendor/lib/.git/config", true),
        (".Amber/hooks.toml", true),
        ("src/.amber", true),
        (".gitignore", false),
        (".github/workflows/ci.yml", false),
        ("src/git/config", false),
        ("amber/x", false),
    ] {
        assert_eq!(protected(&rel(path)), expected, "{path}");
    }
}

/// A directory the writer resolved cannot be swapped for a link under it: a thread flips
/// `d` between a real directory and a symlink out of the workspace while writes, mkdirs and
/// deletes of `d/...` run. Each either lands inside the workspace or is refused.
#[test]
fn a_directory_swapped_for_a_symlink_during_writes_never_redirects_one() {
    for resolver in resolvers() {
        let scene = Scene::new();
        let d = scene.ws.join("d");
        let parked = scene.ws.join("d.real");
        fs::create_dir_all(&d).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU32::new(0));
        let swapper = {
            let (stop, swaps, d, parked, outside) = (
                stop.clone(),
                swaps.clone(),
                d.clone(),
                parked.clone(),
                scene.outside.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if fs::rename(&d, &parked).is_err() {
                        continue;
                    }
                    // The writer may have made a new `d` in between: then no link this time.
                    let _ = symlink(&outside, &d);
                    std::thread::yield_now();
                    // Back to the real one, over whatever the writer made meanwhile.
                    while fs::rename(&parked, &d).is_err() {
                        match fs::symlink_metadata(&d) {
                            Ok(meta) if meta.is_dir() => drop(fs::remove_dir_all(&d)),
                            Ok(_) => drop(fs::remove_file(&d)),
                            Err(_) => {}
                        }
                    }
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let tree = Tree::open_with(&scene.ws, resolver).unwrap();
        let (mut landed, mut refused) = (0u32, 0u32);
        // Until the swapper has flipped `d` often enough, whatever the scheduler does.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut i = 0u32;
        while (swaps.load(Ordering::Relaxed) < 200 || refused == 0 || landed == 0)
            && Instant::now() < deadline
        {
            i += 1;
            let path = rel(&format!("d/sub{}/f{i}", i % 3));
            let parent = path.parent().unwrap();
            let done = tree.make_dirs(&parent).and_then(|()| {
                let (dir, name) = tree.parent_of(&path)?;
                dir.write_file(&name, b"x", 0o644)?;
                dir.remove_file(&name)?;
                Ok(())
            });
            match done {
                Ok(()) => landed += 1,
                // Named by what `d` was when looked at again: either way, refused.
                Err(BeneathError::Refused(
                    Refusal::Symlink { at } | Refusal::NotADirectory { at },
                )) => {
                    assert_eq!(at, rel("d"));
                    refused += 1;
                }
                // `d` between its two states, or moved away under a write.
                Err(BeneathError::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::DirectoryNotEmpty
                    ) => {}
                Err(e) => panic!("{resolver:?}: unexpected {e}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        let swaps = swaps.load(Ordering::Relaxed);
        scene.assert_untouched();
        assert!(swaps > 10, "the race never ran ({swaps} swaps)");
        assert!(landed > 0, "{resolver:?}: no write ever landed");
        assert!(refused > 0, "{resolver:?}: the symlink was never met");
    }
}

/// Through `RestorePlan::apply`: a plan made while `d` was a directory, applied after it
/// became a link out of the workspace, writes the rest and lists what it refused.
#[test]
fn a_restore_plan_lists_what_it_refused_and_writes_the_rest() {
    use super::{BlobStore, RestorePlan, Snapshot};
    let scene = Scene::new();
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    fs::create_dir_all(scene.ws.join("d")).unwrap();
    fs::write(scene.ws.join("d/f"), "in d\n").unwrap();
    fs::write(scene.ws.join("ok.txt"), "ok\n").unwrap();
    let target = Snapshot::take(&scene.ws, None, &store, 1 << 20).unwrap();
    fs::remove_dir_all(scene.ws.join("d")).unwrap();
    fs::remove_file(scene.ws.join("ok.txt")).unwrap();
    let current = Snapshot::take(&scene.ws, Some(&target), &store, 1 << 20).unwrap();
    let plan = RestorePlan::new(&current, &target).unwrap();
    symlink(&scene.outside, scene.ws.join("d")).unwrap();

    let applied = plan.apply(&scene.ws, &store).unwrap();
    assert_eq!(applied.written, [rel("ok.txt")]);
    let refused: Vec<_> = applied
        .refused
        .iter()
        .map(|r| (r.path.clone(), r.refusal.clone()))
        .collect();
    assert_eq!(refused, [(rel("d/f"), Refusal::Symlink { at: rel("d") })]);
    assert_eq!(fs::read_to_string(scene.ws.join("ok.txt")).unwrap(), "ok\n");
    scene.assert_untouched();
}
