//! The open-file limit as servers size their clients by it, as Redis does at start: the soft
//! limit raised to the hard one, and a client count that leaves the descriptors the process
//! needs for itself, so that a client over it is refused with an error rather than an
//! accept that cannot get a descriptor.

/// Raises the open-file limit to its hard maximum so many clients can connect.
pub fn raise_limit() {
    // SAFETY: getrlimit/setrlimit on a zeroed rlimit (plain integers) of our own process.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 && rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

/// How many clients the open-file limit leaves room for once `reserved` descriptors are kept
/// (None: unknown).
pub fn room_for_clients(reserved: usize) -> Option<usize> {
    // SAFETY: getrlimit fills a zeroed rlimit (plain integers) for our own process.
    let limit = unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0).then_some(rl.rlim_cur)?
    };
    Some((limit as usize).saturating_sub(reserved).max(1))
}
