//! End-to-end: `install.sh` puts the real binaries, completions, man pages and the systemd
//! user units under a prefix (here a fresh one, with a fake home), they work from there, and
//! `--uninstall` removes exactly what it wrote — never the user's sessions or config.

use std::path::{Path, PathBuf};
use std::process::Command;

use amber_tests::bin_path;
use amber_tests::steps::run_bounded;

fn install_sh() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../install.sh")
}

fn script(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new("bash");
    cmd.arg(install_sh())
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .env_remove("PREFIX")
        .env_remove("AMBER_SOCKET");
    run_bounded(cmd)
}

#[test]
fn install_puts_everything_under_the_prefix_and_uninstall_takes_exactly_that_back() {
    let home = tempfile::tempdir().unwrap();
    let prefix = home.path().join("opt");
    let built = bin_path("amber-cli").parent().unwrap().to_owned();
    // What the user has that no install may touch.
    let session = home.path().join(".local/share/amber/sessions/s/meta.json");
    std::fs::create_dir_all(session.parent().unwrap()).unwrap();
    std::fs::write(&session, "{}").unwrap();

    let prefix_arg = prefix.display().to_string();
    let from_arg = built.display().to_string();
    let (code, stdout, stderr) =
        script(home.path(), &["--from", &from_arg, "--prefix", &prefix_arg]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("installed amber"), "{stdout}");
    let expected = [
        "bin/amberd",
        "bin/amber",
        "bin/amber-cli",
        "bin/amber-exec",
        "share/bash-completion/completions/amber-cli",
        "share/zsh/site-functions/_amber-cli",
        "share/fish/vendor_completions.d/amber-cli.fish",
        "share/man/man1/amber.1",
        "share/man/man1/amber-cli.1",
        "share/man/man1/amber-cli-run.1",
        "share/amber/installed-files",
    ];
    for file in expected {
        assert!(prefix.join(file).is_file(), "no {file}");
    }
    let units = home.path().join(".config/systemd/user");
    let service = std::fs::read_to_string(units.join("amberd.service")).unwrap();
    assert!(
        service.contains(&format!(
            "ExecStart={}",
            prefix.join("bin/amberd").display()
        )),
        "{service}"
    );
    assert!(units.join("amberd.socket").is_file());
    let tick = std::fs::read_to_string(units.join("amber-routines.service")).unwrap();
    assert!(
        tick.contains(&format!(
            "ExecStart={} --no-autostart routine tick",
            prefix.join("bin/amber-cli").display()
        )),
        "{tick}"
    );
    assert!(units.join("amber-routines.timer").is_file());
    // The installed binaries run from there.
    let out = Command::new(prefix.join("bin/amber-cli"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("amber-cli "));
    let man = std::fs::read_to_string(prefix.join("share/man/man1/amber-cli-run.1")).unwrap();
    assert!(man.contains(".TH amber-cli-run"), "{man}");

    let (code, stdout, stderr) = script(home.path(), &["--uninstall", "--prefix", &prefix_arg]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for file in expected {
        assert!(!prefix.join(file).exists(), "{file} is still there");
    }
    assert!(!units.join("amberd.service").exists());
    assert!(!units.join("amberd.socket").exists());
    assert!(!units.join("amber-routines.service").exists());
    assert!(!units.join("amber-routines.timer").exists());
    assert!(session.is_file(), "the user's sessions stay");
    // A second uninstall has nothing to do, and says so.
    let (code, _, stderr) = script(home.path(), &["--uninstall", "--prefix", &prefix_arg]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("nothing installed"), "{stderr}");
}

#[test]
fn the_release_script_packages_a_checksummed_tarball_and_a_debian_package() {
    let scratch = tempfile::tempdir().unwrap();
    // The real amber-cli and amber, stripped (the script runs them: versions, man pages,
    // completions, units); amberd, which it only copies, stands in small, so packing stays
    // quick on a busy machine.
    let bins = scratch.path().join("bins");
    std::fs::create_dir(&bins).unwrap();
    for bin in ["amber", "amber-cli"] {
        let status = Command::new("strip")
            .arg("-o")
            .arg(bins.join(bin))
            .arg(bin_path(bin))
            .status()
            .unwrap();
        assert!(status.success(), "strip {bin}");
    }
    std::fs::copy("/bin/true", bins.join("amberd")).unwrap();
    std::fs::copy("/bin/true", bins.join("amber-exec")).unwrap();
    let out = scratch.path().join("dist");
    let mut cmd = Command::new("bash");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/release.sh"))
        .arg("--from")
        .arg(&bins)
        .arg("--out")
        .arg(&out)
        .env("DEB_COMPRESSION", "none");
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let version = env!("CARGO_PKG_VERSION");
    let deb = format!("amber_{version}_amd64.deb");
    let tarball = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".tar.gz"))
        .expect("a tarball");
    assert!(
        tarball.starts_with(&format!("amber-{version}-")),
        "{tarball}"
    );
    // Each with a checksum that holds.
    let check = Command::new("sha256sum")
        .current_dir(&out)
        .args(["-c", &format!("{tarball}.sha256"), &format!("{deb}.sha256")])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let listed =
        |cmd: &mut Command| String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned();
    let in_tarball = listed(Command::new("tar").arg("-tzf").arg(out.join(&tarball)));
    for file in [
        "bin/amberd",
        "bin/amber",
        "bin/amber-cli",
        "bin/amber-exec",
        "install.sh",
        "README.md",
    ] {
        assert!(in_tarball.contains(file), "{file} not in {in_tarball}");
    }
    let in_deb = listed(Command::new("dpkg-deb").arg("-c").arg(out.join(&deb)));
    for file in [
        "./usr/bin/amberd",
        "./usr/bin/amber-cli",
        "./usr/bin/amber-exec",
        "./usr/share/man/man1/amber.1.gz",
        "./usr/share/man/man1/amber-cli-run.1.gz",
        "./usr/share/bash-completion/completions/amber-cli",
        "./usr/lib/systemd/user/amberd.service",
    ] {
        assert!(in_deb.contains(file), "{file} not in {in_deb}");
    }
    let service = listed(
        Command::new("sh")
            .arg("-c")
            .arg("dpkg-deb --fsys-tarfile \"$1\" | tar -xO ./usr/lib/systemd/user/amberd.service")
            .arg("sh")
            .arg(out.join(&deb)),
    );
    assert!(service.contains("ExecStart=/usr/bin/amberd"), "{service}");
    let tick = listed(
        Command::new("sh")
            .arg("-c")
            .arg("dpkg-deb --fsys-tarfile \"$1\" | tar -xO ./usr/lib/systemd/user/amber-routines.service")
            .arg("sh")
            .arg(out.join(&deb)),
    );
    assert!(
        tick.contains("\nExecStart=/usr/bin/amber-cli --no-autostart routine tick\n"),
        "{tick}"
    );
    let control = listed(
        Command::new("dpkg-deb")
            .arg("-f")
            .arg(out.join(&deb))
            .arg("Version"),
    );
    assert_eq!(control.trim(), version);
}
