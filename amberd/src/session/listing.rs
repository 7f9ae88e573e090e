//! `session/list` paging: newest first, with an opaque cursor naming the last row of the
//! previous page.
//!
//! **Invariant:** a page starts strictly after the cursor's `(createdAt, sessionId)` in the
//! newest-first order, so sessions created or deleted between two pages never shift the
//! rows that follow: no row is returned twice and none that existed is skipped. A cursor
//! that does not parse is an error (-32602, naming `cursor`), never the first page.

use amber_proto::SessionInfo;

use super::SessionError;

/// Rows per page when the client does not say.
const DEFAULT_LIMIT: usize = 100;
/// Version prefix of the cursor's encoding.
const CURSOR_PREFIX: &str = "c1_";

/// One page of `all` (in any order) after `cursor`; the cursor of the next page when
/// there is one.
pub(super) fn page(
    mut all: Vec<SessionInfo>,
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<(Vec<SessionInfo>, Option<String>), SessionError> {
    let after = cursor.map(decode).transpose()?;
    all.sort_by(|a, b| key(b).cmp(&key(a)));
    let start = match &after {
        // Newest first: everything strictly older than the cursor's row.
        Some((created, id)) => all.partition_point(|s| key(s) >= (created.as_str(), id.as_str())),
        None => 0,
    };
    let limit = limit.map_or(DEFAULT_LIMIT, |l| l.clamp(1, 1000) as usize);
    let end = start.saturating_add(limit).min(all.len());
    let next = (end < all.len())
        .then(|| all.get(end.wrapping_sub(1)))
        .flatten()
        .map(encode);
    all.truncate(end);
    all.drain(..start);
    Ok((all, next))
}

fn key(info: &SessionInfo) -> (&str, &str) {
    (info.created_at.as_str(), info.session_id.as_str())
}

/// `c1_` and the hex of `createdAt`, a NUL, and `sessionId`.
fn encode(last: &SessionInfo) -> String {
    let raw = format!("{}\0{}", last.created_at, last.session_id);
    let mut out = String::with_capacity(CURSOR_PREFIX.len() + 2 * raw.len());
    out.push_str(CURSOR_PREFIX);
    for b in raw.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn decode(cursor: &str) -> Result<(String, String), SessionError> {
    let bad = || {
        SessionError::InvalidParams(format!(
            "cursor: {cursor:?} is not a cursor this daemon returned (pass nextCursor as is)"
        ))
    };
    let hex = cursor.strip_prefix(CURSOR_PREFIX).ok_or_else(bad)?;
    if hex.len() % 2 != 0 {
        return Err(bad());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (created, id) = text.split_once('\0').ok_or_else(bad)?;
    if created.is_empty() || id.is_empty() {
        return Err(bad());
    }
    Ok((created.to_owned(), id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, created: &str) -> SessionInfo {
        SessionInfo {
            parent: None,
            goal: None,
            routine: None,
            session_id: id.into(),
            cwd: "/".into(),
            mode: amber_proto::Mode::default(),
            model: "m".into(),
            title: String::new(),
            name: None,
            state: amber_proto::SessionState::Idle,
            created_at: created.into(),
            updated_at: created.into(),
            usage: amber_proto::Usage::default(),
            provider: None,
            worktree: None,
            sandbox: None,
            agent: None,
            max_budget_usd: None,
            max_tokens_total: None,
            environment: None,
        }
    }

    fn ids(rows: &[SessionInfo]) -> Vec<&str> {
        rows.iter().map(|s| s.session_id.as_str()).collect()
    }

    #[test]
    fn pages_walk_newest_first_and_stay_put_when_sessions_are_added() {
        let mut all: Vec<SessionInfo> = (0..5)
            .map(|i| info(&format!("s{i}"), &format!("2026-01-0{}T00:00:00Z", i + 1)))
            .collect();
        let (first, next) = page(all.clone(), None, Some(2)).unwrap();
        assert_eq!(ids(&first), ["s4", "s3"]);
        // A newer session appears between pages: the next page does not shift.
        all.push(info("s9", "2026-02-01T00:00:00Z"));
        let (second, next) = page(all.clone(), next.as_deref(), Some(2)).unwrap();
        assert_eq!(ids(&second), ["s2", "s1"]);
        let (last, next) = page(all.clone(), next.as_deref(), Some(2)).unwrap();
        assert_eq!(ids(&last), ["s0"]);
        assert_eq!(next, None);
        // Ties on createdAt are ordered by id, and the cursor keeps them apart.
        let same: Vec<SessionInfo> = ["a", "b", "c"]
            .iter()
            .map(|id| info(id, "2026-01-01T00:00:00Z"))
            .collect();
        let (one, next) = page(same.clone(), None, Some(1)).unwrap();
        let (two, _) = page(same, next.as_deref(), Some(5)).unwrap();
        assert_eq!((ids(&one), ids(&two)), (vec!["c"], vec!["b", "a"]));
    }

    #[test]
    fn a_cursor_that_does_not_parse_names_the_param() {
        for bad in ["garbage", "c1_zz", "c1_abc", "c1_", "2", "c1_6100"] {
            match page(Vec::new(), Some(bad), None) {
                Err(SessionError::InvalidParams(m)) => assert!(m.starts_with("cursor"), "{m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
