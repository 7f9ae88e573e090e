//! What amber's long-running processes (amberd, the executor) do first: no core file and no
//! same-user ptrace or `/proc/<pid>/mem` of them, so a tool process cannot read their memory.

/// Makes this process non-dumpable with a soft core limit of 0.
pub fn no_core_dumps() -> std::io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit out pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    limit.rlim_cur = 0;
    // SAFETY: a valid rlimit, lowering the soft limit only (always permitted).
    if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
