//! The file headers of an `apply_patch` patch (`*** Add File: PATH`, `*** Delete File:`,
//! `*** Update File:`, `*** Move to:`): the one reading of them, shared by the policy (which
//! must see every path a patch touches) and amberd's patch parser (which may only touch
//! paths read this way), so the two can never disagree about what a patch writes.

/// One file header line of a patch, with its path (trimmed, never empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchHeader<'a> {
    Add(&'a str),
    Delete(&'a str),
    Update(&'a str),
    MoveTo(&'a str),
}

impl<'a> PatchHeader<'a> {
    /// The path the header names.
    pub fn path(self) -> &'a str {
        match self {
            PatchHeader::Add(p)
            | PatchHeader::Delete(p)
            | PatchHeader::Update(p)
            | PatchHeader::MoveTo(p) => p,
        }
    }
}

/// The header on this line (surrounding whitespace and a CR ignored), if it is one.
pub fn patch_header(line: &str) -> Option<PatchHeader<'_>> {
    let line = line.trim();
    let header = if let Some(path) = line.strip_prefix("*** Add File:") {
        PatchHeader::Add(path.trim())
    } else if let Some(path) = line.strip_prefix("*** Delete File:") {
        PatchHeader::Delete(path.trim())
    } else if let Some(path) = line.strip_prefix("*** Update File:") {
        PatchHeader::Update(path.trim())
    } else if let Some(path) = line.strip_prefix("*** Move to:") {
        PatchHeader::MoveTo(path.trim())
    } else {
        return None;
    };
    (!header.path().is_empty()).then_some(header)
}

/// Every path the patch's headers name, in order, each once. Lines are split as
/// `str::lines` splits them, as the parser does.
pub(crate) fn patch_paths(patch: &str) -> Vec<&str> {
    let mut paths: Vec<&str> = Vec::new();
    for path in patch
        .lines()
        .filter_map(patch_header)
        .map(PatchHeader::path)
    {
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_kind_is_read_with_whitespace_and_cr_ignored() {
        assert_eq!(
            patch_header("*** Add File: a b.txt\r"),
            Some(PatchHeader::Add("a b.txt"))
        );
        assert_eq!(
            patch_header("  *** Delete File:old.rs "),
            Some(PatchHeader::Delete("old.rs"))
        );
        assert_eq!(
            patch_header("*** Update File: src/lib.rs"),
            Some(PatchHeader::Update("src/lib.rs"))
        );
        assert_eq!(
            patch_header("*** Move to: src/new.rs"),
            Some(PatchHeader::MoveTo("src/new.rs"))
        );
        for not in [
            "*** Add File:",
            "*** Add File:   ",
            "+*** Add File x",
            "*** End Patch",
            "@@",
        ] {
            assert_eq!(patch_header(not), None, "{not}");
        }
    }

    #[test]
    fn paths_are_listed_once_in_order() {
        let patch = "*** Begin Patch\n*** Update File: a\r\n@@\n-x\n+y\n*** Move to: .amber/b\n\
                     *** Add File: c\n+*** Delete File: not-a-header\n*** Delete File: a\n*** End Patch";
        assert_eq!(patch_paths(patch), ["a", ".amber/b", "c"]);
    }
}
