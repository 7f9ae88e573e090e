//! The closest region of a file to text that was not found in it, for the error that lets
//! the model correct its `old_string` (or a patch hunk): the window of as many lines as the
//! text with the highest mean line similarity, shown with line numbers and context.
//!
//! Line similarity is the Sørensen–Dice coefficient of the lines' character bigrams (after
//! trimming), which rewards shared runs of characters whatever the edit distance between
//! them, and costs one sorted merge per pair of lines. The scan is bounded: at most
//! [`MAX_COMPARISONS`] line pairs (the wanted text's first lines only, when it is long).

/// Most line comparisons one search makes.
const MAX_COMPARISONS: usize = 2_000_000;
/// Lines of context shown before and after the region.
const CONTEXT: usize = 2;
/// Most region lines shown (the middle of a longer region is left out).
const MAX_SHOWN: usize = 16;
/// Below this mean similarity nothing in the file resembles the text.
const MIN_SIMILARITY: f64 = 0.3;

/// A region of the file: lines `first..=last` (1-based) and how similar they are (0..=1).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Region {
    pub(crate) first: usize,
    pub(crate) last: usize,
    pub(crate) similarity: f64,
}

/// The region of `lines` most like `wanted`, if any is similar enough.
pub(crate) fn closest(lines: &[&str], wanted: &[&str]) -> Option<Region> {
    if lines.is_empty() || wanted.is_empty() {
        return None;
    }
    let span = wanted.len().min(lines.len());
    let compared = span.min((MAX_COMPARISONS / lines.len()).max(1));
    let file: Vec<Bigrams> = lines.iter().map(|l| Bigrams::of(l)).collect();
    let want: Vec<Bigrams> = wanted[..compared].iter().map(|l| Bigrams::of(l)).collect();
    let mut best: Option<(usize, f64)> = None;
    for start in 0..=lines.len() - span {
        let window = &file[start..start + compared];
        let score = want.iter().zip(window).map(|(w, f)| w.dice(f)).sum::<f64>() / compared as f64;
        if best.is_none_or(|(_, top)| score > top) {
            best = Some((start, score));
        }
    }
    let (start, similarity) = best?;
    (similarity >= MIN_SIMILARITY).then_some(Region {
        first: start + 1,
        last: start + span,
        similarity,
    })
}

/// The region with [`CONTEXT`] lines around it, numbered like `read` numbers lines.
pub(crate) fn render(lines: &[&str], region: &Region) -> String {
    let from = region.first.saturating_sub(CONTEXT).max(1);
    let to = (region.last + CONTEXT).min(lines.len());
    let mut out = String::new();
    let mut skipped = false;
    for number in from..=to {
        let inside = (region.first..=region.last).contains(&number);
        let len = region.last - region.first + 1;
        let middle = len > MAX_SHOWN
            && number >= region.first + MAX_SHOWN / 2
            && number <= region.last - MAX_SHOWN / 2;
        if inside && middle {
            if !skipped {
                out.push_str("   …\n");
                skipped = true;
            }
            continue;
        }
        out.push_str(&format!("{number:>6}\t{}\n", lines[number - 1]));
    }
    out
}

/// The character bigrams of a trimmed line, sorted, for the Dice coefficient.
struct Bigrams(Vec<(char, char)>);

impl Bigrams {
    fn of(line: &str) -> Bigrams {
        let chars: Vec<char> = line.trim().chars().collect();
        let mut pairs: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
        if pairs.is_empty() {
            // A one-character (or blank) line: compare it as itself.
            pairs = chars.iter().map(|&c| (c, '\0')).collect();
        }
        pairs.sort_unstable();
        Bigrams(pairs)
    }

    /// 2·|common| / (|a| + |b|); two blank lines are alike.
    fn dice(&self, other: &Bigrams) -> f64 {
        let (a, b) = (&self.0, &other.0);
        if a.is_empty() && b.is_empty() {
            return 1.0;
        }
        let (mut i, mut j, mut common) = (0, 0, 0usize);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    common += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        2.0 * common as f64 / (a.len() + b.len()) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Vec<String> {
        (1..=30)
            .map(|i| format!("let value_{i} = compute({i});"))
            .collect()
    }

    #[test]
    fn the_most_similar_window_is_found() {
        let owned = file();
        let lines: Vec<&str> = owned.iter().map(String::as_str).collect();
        let wanted = ["let value_12 = compute(12)", "let valeu_13 = compute(13);"];
        let region = closest(&lines, &wanted).unwrap();
        assert_eq!((region.first, region.last), (12, 13));
        assert!(region.similarity > 0.8, "{region:?}");
        let shown = render(&lines, &region);
        assert!(shown.starts_with("    10\tlet value_10"), "{shown}");
        assert!(
            shown.ends_with("    15\tlet value_15 = compute(15);\n"),
            "{shown}"
        );
    }

    #[test]
    fn nothing_alike_is_no_region() {
        let lines = ["fn main() {}", "struct X;"];
        assert_eq!(closest(&lines, &["SELECT * FROM users WHERE 1=1"]), None);
        assert_eq!(closest(&[], &["x"]), None);
    }

    #[test]
    fn a_long_region_is_shown_without_its_middle() {
        let owned = file();
        let lines: Vec<&str> = owned.iter().map(String::as_str).collect();
        let region = Region {
            first: 3,
            last: 26,
            similarity: 1.0,
        };
        let shown = render(&lines, &region);
        assert_eq!(shown.matches('\n').count(), 2 + 8 + 1 + 8 + 2, "{shown}");
        assert!(shown.contains("   …\n"), "{shown}");
    }

    #[test]
    fn wanted_text_longer_than_the_file_still_finds_it() {
        let lines = ["alpha beta", "gamma"];
        let region = closest(&lines, &["alpha beta", "gamma", "delta", "epsilon"]).unwrap();
        assert_eq!((region.first, region.last), (1, 2));
    }
}
