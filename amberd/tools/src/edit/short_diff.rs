//! The short diff `edit` shows the model: per replacement, the changed lines only (no
//! context), at most [`MAX_HUNKS`] hunks and [`MAX_DIFF_LINES`] lines. Clients get the full
//! unified diff (`tools::diff`) in the event instead.

/// Hunks shown in the diff; further replacements are only counted.
const MAX_HUNKS: usize = 8;
/// Diff lines shown in all.
pub(super) const MAX_DIFF_LINES: usize = 80;

/// A short unified-style diff of the lines touched by replacing `old_len` bytes at each of
/// `positions` (ascending, not overlapping) in `before` with `new_len` bytes, giving
/// `after`. No context lines.
pub(super) fn short_diff(
    before: &str,
    after: &str,
    positions: &[usize],
    old_len: usize,
    new_len: usize,
) -> String {
    let delta = new_len as isize - old_len as isize;
    // Hunks in `before` coordinates: (line start, line end, first match, last match).
    let mut hunks: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut total_matches = 0;
    for (k, &pos) in positions.iter().enumerate() {
        total_matches = k + 1;
        let start = before[..pos].rfind('\n').map_or(0, |i| i + 1);
        let match_end = pos + old_len;
        let end = before[match_end..]
            .find('\n')
            .map_or(before.len(), |i| match_end + i);
        let full = hunks.len() == MAX_HUNKS;
        match hunks.last_mut() {
            Some(last) if start <= last.1 => {
                last.1 = end;
                last.3 = k;
            }
            _ if full => {}
            _ => hunks.push((start, end, k, k)),
        }
    }
    let shift = |at: usize, matches_before: usize| {
        at.saturating_add_signed(delta * matches_before as isize)
    };
    let mut out = String::new();
    let mut lines_out = 0;
    let mut shown_matches = 0;
    for &(start, end, first, last) in &hunks {
        let old_seg: Vec<&str> = before[start..end].split('\n').collect();
        let new_start = shift(start, first);
        let new_end = shift(end, last + 1).min(after.len()).max(new_start);
        let new_seg: Vec<&str> = after[new_start..new_end].split('\n').collect();
        let prefix = old_seg
            .iter()
            .zip(&new_seg)
            .take_while(|(a, b)| a == b)
            .count();
        let max_suffix = old_seg.len().min(new_seg.len()) - prefix;
        let suffix = old_seg
            .iter()
            .rev()
            .zip(new_seg.iter().rev())
            .take(max_suffix)
            .take_while(|(a, b)| a == b)
            .count();
        let removed = &old_seg[prefix..old_seg.len() - suffix];
        let added = &new_seg[prefix..new_seg.len() - suffix];
        let old_line = before[..start].matches('\n').count() + 1 + prefix;
        let new_line = after[..new_start].matches('\n').count() + 1 + prefix;
        out.push_str(&format!(
            "@@ -{old_line},{} +{new_line},{} @@\n",
            removed.len(),
            added.len()
        ));
        for (sign, lines) in [('-', removed), ('+', added)] {
            for line in lines {
                if lines_out == MAX_DIFF_LINES {
                    out.push_str("… (diff cut)\n");
                    return out;
                }
                out.push(sign);
                out.push_str(line);
                out.push('\n');
                lines_out += 1;
            }
        }
        shown_matches = last + 1;
    }
    if total_matches > shown_matches {
        out.push_str(&format!(
            "… ({} more replacements not shown)\n",
            total_matches - shown_matches
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_caps_hunks() {
        let before: String = (0..20).map(|i| format!("k{i} = v\n")).collect();
        let after = before.replace("v", "w");
        let positions: Vec<usize> = before.match_indices('v').map(|(i, _)| i).collect();
        let out = short_diff(&before, &after, &positions, 1, 1);
        assert_eq!(out.matches("@@ -").count(), MAX_HUNKS);
        assert!(
            out.ends_with("… (12 more replacements not shown)\n"),
            "{out}"
        );
    }
}
