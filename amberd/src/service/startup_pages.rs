//! Handing back what only the start needed. Before `main`, the dynamic loader reads the
//! executable's whole relocation table (`.rela.dyn`: 1.3 MB in a release amberd) to fix up
//! its pointers, and never reads it again; its pages stay mapped for the daemon's life, about
//! 1.3 of an idle daemon's 15 MB. Once the daemon serves, [`release_relocation_table`]
//! unmaps those pages (`MADV_DONTNEED`): they are read-only and file-backed, so were anything
//! ever to read them again it would get the same bytes back from the file.
//!
//! Packing the table (`-z pack-relative-relocs`, DT_RELR) would shrink it instead, but a
//! binary built that way needs glibc 2.36 and no longer runs on distributions amber supports.

/// Unmaps the executable's relocation table; returns how many bytes were released (0 when
/// there is nothing to release or the platform has no such table).
pub fn release_relocation_table() -> usize {
    imp::release()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    use std::ffi::{c_int, c_void};

    /// An entry of the `PT_DYNAMIC` array (`Elf64_Dyn`).
    #[repr(C)]
    struct DynamicEntry {
        tag: i64,
        value: u64,
    }

    const DT_NULL: i64 = 0;
    const DT_RELA: i64 = 7;
    const DT_RELASZ: i64 = 8;
    const DT_TEXTREL: i64 = 22;
    const PAGE: usize = 4096;

    pub(super) fn release() -> usize {
        let mut released = 0usize;
        // SAFETY: the callback only reads the loader's program headers and dynamic array
        // for the duration of the call, and writes to `released`, which outlives it.
        unsafe {
            libc::dl_iterate_phdr(Some(first_object), (&raw mut released).cast::<c_void>());
        }
        released
    }

    /// Called for each loaded object; the first is the executable itself, and the only one
    /// looked at (returning non-zero stops the walk).
    unsafe extern "C" fn first_object(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        released: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid `dl_phdr_info` for the call's duration.
        let info = unsafe { &*info };
        if info.dlpi_phdr.is_null() {
            return 1;
        }
        // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers of a loaded object.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        let base = info.dlpi_addr as usize;
        let read_only: Vec<(usize, usize)> = headers
            .iter()
            .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_W == 0)
            .map(|h| {
                (
                    base + h.p_vaddr as usize,
                    base + (h.p_vaddr + h.p_memsz) as usize,
                )
            })
            .collect();
        let Some(dynamic) = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC) else {
            return 1;
        };
        let (mut table, mut size, mut text_relocations) = (0usize, 0usize, false);
        let mut entry = (base + dynamic.p_vaddr as usize) as *const DynamicEntry;
        // SAFETY: the dynamic array of a loaded object ends with DT_NULL.
        unsafe {
            while (*entry).tag != DT_NULL {
                match (*entry).tag {
                    DT_RELA => table = (*entry).value as usize,
                    DT_RELASZ => size = (*entry).value as usize,
                    DT_TEXTREL => text_relocations = true,
                    _ => {}
                }
                entry = entry.add(1);
            }
        }
        if table == 0 || size == 0 || text_relocations {
            return 1;
        }
        // glibc rewrites the entry to the loaded address; other loaders leave the offset.
        let inside = |start: usize| {
            read_only
                .iter()
                .any(|&(lo, hi)| lo <= start && start + size <= hi)
        };
        let start = if inside(table) {
            table
        } else if inside(base + table) {
            base + table
        } else {
            return 1;
        };
        // Only whole pages of the table: its neighbours may be in use.
        let first = start.div_ceil(PAGE) * PAGE;
        let end = (start + size) / PAGE * PAGE;
        if end <= first {
            return 1;
        }
        // SAFETY: [first, end) lies inside a read-only, file-backed segment of the
        // executable holding nothing but the relocation table, which nothing reads after
        // the loader did; a later read would fault the same bytes back in from the file.
        let done = unsafe { libc::madvise(first as *mut c_void, end - first, libc::MADV_DONTNEED) };
        if done == 0 {
            // SAFETY: `released` is the `usize` that `release` passed in.
            unsafe { *released.cast::<usize>() = end - first };
        }
        1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub(super) fn release() -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of this process among `count` pages from `start` (`/proc/self/pagemap`).
    fn resident_pages(start: usize, count: usize) -> usize {
        use std::io::{Read, Seek, SeekFrom};
        let mut map = std::fs::File::open("/proc/self/pagemap").unwrap();
        map.seek(SeekFrom::Start((start / 4096 * 8) as u64))
            .unwrap();
        let mut entries = vec![0u8; count * 8];
        map.read_exact(&mut entries).unwrap();
        entries
            .chunks_exact(8)
            .filter(|e| u64::from_le_bytes((*e).try_into().unwrap()) >> 63 == 1)
            .count()
    }

    /// The relocation table's span in this (position-independent) test binary, from the
    /// file's section headers.
    fn relocation_table_span() -> (usize, usize) {
        let elf = std::fs::read("/proc/self/exe").unwrap();
        let u16_at = |o: usize| usize::from(u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()));
        let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
        let (sections, entry_size, count) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
        let names = sections + u16_at(0x3e) * entry_size;
        let names_offset = u64_at(names + 0x18);
        for i in 0..count {
            let header = sections + i * entry_size;
            let name_at = names_offset
                + u32::from_le_bytes(elf[header..header + 4].try_into().unwrap()) as usize;
            if elf[name_at..].starts_with(b".rela.dyn\0") {
                return (u64_at(header + 0x10), u64_at(header + 0x20));
            }
        }
        panic!("no .rela.dyn in the test binary");
    }

    fn load_address() -> usize {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let line = maps
            .lines()
            .find(|l| l.ends_with(exe.to_str().unwrap()))
            .unwrap();
        usize::from_str_radix(line.split('-').next().unwrap(), 16).unwrap()
    }

    #[test]
    fn the_relocation_table_leaves_the_resident_set_and_the_process_goes_on() {
        let (address, size) = relocation_table_span();
        let start = (load_address() + address).div_ceil(4096) * 4096;
        let pages = (load_address() + address + size) / 4096 - start / 4096;
        assert!(pages > 0, "the table spans no whole page");
        // Read it, as the loader did: every page resident.
        // SAFETY: the span is mapped read-only for the life of the process.
        let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, pages * 4096) };
        let sum: u64 = bytes.iter().step_by(4096).map(|b| u64::from(*b)).sum();
        assert_eq!(resident_pages(start, pages), pages, "{sum}");

        let released = release_relocation_table();
        assert_eq!(released, pages * 4096);
        assert_eq!(resident_pages(start, pages), 0);
        // The bytes are still there to read, and pointers it fixed up still work.
        let again: u64 = bytes.iter().step_by(4096).map(|b| u64::from(*b)).sum();
        assert_eq!(again, sum);
        assert_eq!(format!("{:?}", Some("fixed up")), "Some(\"fixed up\")");
    }
}
