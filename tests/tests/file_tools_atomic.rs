//! The file tools replace files atomically, never through the inode: through the real daemon,
//! `write` and `edit` on a hardlink in the workspace to a file outside it leave the outside
//! file untouched and give the workspace entry the new content; an executable stays
//! executable; no temp file is left behind; a symlink out of the workspace is still refused.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{Events, connect, done, new_session, prompt_turn, spawn};
use amber_tests::e2e3::{call, calls, result_of};
use serde_json::json;

const SENTINEL: &str = "sentinel: outside the workspace\n";

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn write_and_edit_replace_a_hardlink_without_touching_its_outside_target() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let outside = daemon.dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let ws = &daemon.workspace;
    for name in ["w-target", "e-target"] {
        fs::write(outside.join(name), SENTINEL).unwrap();
    }
    fs::hard_link(outside.join("w-target"), ws.join("w-link")).unwrap();
    fs::hard_link(outside.join("e-target"), ws.join("e-link")).unwrap();
    fs::write(ws.join("run.sh"), "#!/bin/sh\necho old\n").unwrap();
    fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("out")).unwrap();

    mock.push([
        calls(vec![
            call(
                "w_link",
                "write",
                &json!({"path": "w-link", "content": "written\n"}),
            ),
            call(
                "e_link",
                "edit",
                &json!({"path": "e-link", "old_string": "outside", "new_string": "inside"}),
            ),
            call(
                "e_exec",
                "edit",
                &json!({"path": "run.sh", "old_string": "old", "new_string": "new"}),
            ),
            call(
                "w_out",
                "write",
                &json!({"path": "out/w-target", "content": "x"}),
            ),
        ]),
        MockTurn::text("Done."),
        done(),
    ]);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "write them").await;

    for id in ["w_link", "e_link", "e_exec"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{id}: {output}");
    }
    assert_ne!(
        result_of(&turn, "w_out").0,
        "ok",
        "a symlink out stays refused"
    );

    for name in ["w-target", "e-target"] {
        assert_eq!(
            fs::read_to_string(outside.join(name)).unwrap(),
            SENTINEL,
            "{name}"
        );
    }
    assert_eq!(fs::read_to_string(ws.join("w-link")).unwrap(), "written\n");
    assert_eq!(
        fs::read_to_string(ws.join("e-link")).unwrap(),
        "sentinel: inside the workspace\n"
    );
    for name in ["w-link", "e-link"] {
        assert_eq!(fs::metadata(ws.join(name)).unwrap().nlink(), 1, "{name}");
    }
    let script = fs::metadata(ws.join("run.sh")).unwrap();
    assert_eq!(script.permissions().mode() & 0o777, 0o755);
    assert_eq!(
        fs::read_to_string(ws.join("run.sh")).unwrap(),
        "#!/bin/sh\necho new\n"
    );
    assert_eq!(
        names(ws),
        ["e-link", "out", "run.sh", "w-link"],
        "no temp file left"
    );
    assert_eq!(names(&outside), ["e-target", "w-target"]);
}
