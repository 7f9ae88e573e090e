//! Tests of verify on damaged logs, salvage, and the confirm tag of pushes.

use std::fs;

use amber_proto::Message;

use super::tests::{Fixture, meta, populate, started};
use super::*;
use crate::context::Context;

/// Byte offsets where each line of `bytes` starts.
fn line_starts(bytes: &[u8]) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect()
}

#[test]
fn verify_reports_a_damaged_record_and_salvage_keeps_what_comes_before_it() {
    let f = Fixture::new();
    populate(&f.store, "s");
    let path = f.log_path("s");
    let full = fs::read(&path).unwrap();
    let starts = line_starts(&full);
    // Record 4 ("hi" pushed) edited without fixing its CRC.
    let mut bad = full.clone();
    let at = starts[3] + 20;
    bad[at] ^= 0x01;
    fs::write(&path, &bad).unwrap();

    let report = f.store.verify("s").unwrap();
    let corrupt = report.corrupt.expect("the damage is reported");
    assert_eq!((corrupt.record, corrupt.file.as_str()), (4, "log"));
    assert!(
        corrupt.reason.contains("CRC mismatch"),
        "{}",
        corrupt.reason
    );
    // Counted up to the damage: the system prompt, two events.
    assert_eq!((report.messages, report.events), (1, 2));
    assert!(report.first_broken.is_none() && !report.torn_tail);
    assert_eq!(fs::read(&path).unwrap(), bad, "verify never writes");

    // Held by a writer, nothing is salvaged.
    let held = fs::File::open(&path).unwrap();
    held.lock().unwrap();
    assert!(matches!(f.store.salvage("s"), Err(StoreError::Locked(_))));
    drop(held);

    let salvaged = f.store.salvage("s").unwrap().expect("damage found");
    assert_eq!(salvaged.record, 4);
    assert_eq!(salvaged.file, "log.corrupt");
    assert_eq!(fs::read(&path).unwrap(), &full[..starts[3]]);
    let dir = f.store.sessions_dir().join("s");
    assert_eq!(fs::read(dir.join("log.corrupt")).unwrap(), bad);
    let loaded = f.store.load("s").unwrap();
    assert_eq!((loaded.events.len(), loaded.context.len()), (2, 1));
    // The salvaged log takes appends; verify still reports the damage it came from.
    let mut log = f.store.open_log("s").unwrap();
    log.append_event(3, &started(3, "t3"), true).unwrap();
    drop(log);
    let report = f.store.verify("s").unwrap();
    assert_eq!(report.events, 3);
    let corrupt = report.corrupt.unwrap();
    assert_eq!((corrupt.record, corrupt.file.as_str()), (4, "log.corrupt"));
    assert_eq!(
        f.store.salvage("s").unwrap(),
        None,
        "nothing left to salvage"
    );
}

#[test]
fn the_confirm_tag_is_replayed_until_its_message_is_popped() {
    let f = Fixture::new();
    let mut log = f.store.create(&meta("s", "1")).unwrap();
    let mut ctx = Context::new();
    let mut push = |log: &mut SessionLog, m: Message, confirm: bool| {
        let h = ctx.push(m.clone());
        log.append_push(&m, h, confirm, false).unwrap();
    };
    push(&mut log, Message::system("sys"), false);
    push(&mut log, Message::user("do it"), false);
    push(&mut log, Message::user("are you done?"), true);
    drop(log);
    let loaded = f.store.load("s").unwrap();
    assert_eq!(loaded.confirm_at, Some(2));
    assert_eq!(loaded.context[2].0, Message::user("are you done?"));
    // Popped (the model confirmed), the mark goes with it.
    let mut log = f.store.open_log("s").unwrap();
    log.append_pop(false).unwrap();
    drop(log);
    assert_eq!(f.store.load("s").unwrap().confirm_at, None);
    assert!(f.store.verify("s").unwrap().first_broken.is_none());
}

#[test]
fn a_seq_gap_in_the_middle_is_salvaged_too() {
    let f = Fixture::new();
    let mut log = f.store.create(&meta("s", "1")).unwrap();
    log.append_event(1, &started(1, "t"), false).unwrap();
    drop(log);
    let path = f.log_path("s");
    let good = fs::read(&path).unwrap();
    let mut rest = Vec::new();
    record::encode_event(&mut rest, 3, &started(3, "t"));
    record::encode_event(&mut rest, 4, &started(4, "t"));
    fs::write(&path, [&good[..], &rest[..]].concat()).unwrap();
    assert!(matches!(
        f.store.load("s"),
        Err(StoreError::Corrupt { record: 2, .. })
    ));
    let corrupt = f.store.verify("s").unwrap().corrupt.unwrap();
    assert!(corrupt.reason.contains("seq 3"), "{}", corrupt.reason);
    assert_eq!(f.store.salvage("s").unwrap().unwrap().record, 2);
    assert_eq!(f.store.load("s").unwrap().events.len(), 1);
    assert_eq!(f.store.verify("s").unwrap().corrupt.unwrap().record, 2);
}
