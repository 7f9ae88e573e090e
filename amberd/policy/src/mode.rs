//! Agent modes as a policy decision: read mode allows only read-only tools,
//! write and yolo allow every tool (approvals refine this later).

use amber_proto::Mode;

/// Whether `mode` lets a tool run at all. `Err` carries the reason shown to the
/// model in the `denied` result.
pub fn mode_allows(mode: Mode, tool_read_only: bool) -> Result<(), String> {
    match mode {
        Mode::Read if !tool_read_only => Err(
            "the session is in read mode, which allows only read-only tools; \
             ask the user to switch to write mode to change files or run commands"
                .to_owned(),
        ),
        Mode::Read | Mode::Write | Mode::Yolo => Ok(()),
    }
}

/// The less permissive of two modes: a sub-agent never runs looser than its parent.
pub fn narrower_mode(a: Mode, b: Mode) -> Mode {
    fn rank(mode: Mode) -> u8 {
        match mode {
            Mode::Read => 0,
            Mode::Write => 1,
            Mode::Yolo => 2,
        }
    }
    if rank(a) <= rank(b) { a } else { b }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrower_mode_wins() {
        assert_eq!(narrower_mode(Mode::Write, Mode::Read), Mode::Read);
        assert_eq!(narrower_mode(Mode::Read, Mode::Yolo), Mode::Read);
        assert_eq!(narrower_mode(Mode::Yolo, Mode::Write), Mode::Write);
        assert_eq!(narrower_mode(Mode::Yolo, Mode::Yolo), Mode::Yolo);
    }

    #[test]
    fn read_mode_denies_writers_only() {
        assert!(mode_allows(Mode::Read, true).is_ok());
        let reason = mode_allows(Mode::Read, false).unwrap_err();
        assert!(reason.contains("read mode"), "{reason}");
    }

    #[test]
    fn write_and_yolo_allow_everything() {
        for mode in [Mode::Write, Mode::Yolo] {
            assert!(mode_allows(mode, true).is_ok());
            assert!(mode_allows(mode, false).is_ok());
        }
    }
}
