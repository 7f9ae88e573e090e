//! The seccomp filter, installed last: whatever the other layers leave possible, these
//! system calls fail with `EPERM` — new namespaces and mounts (which could undo the view),
//! ptrace and cross-process memory access (which could steer amberd or a process outside),
//! io_uring (which performs operations around this filter), kernel keyrings, BPF, perf,
//! modules, terminal input injection (`TIOCSTI`, `TIOCLINUX`), resource limits, priorities
//! and CPU or memory placement of any process but the caller itself (`prlimit --pid`,
//! `renice`, `taskset -p`, `ionice -p` would reach amberd: same uid, no ptrace check), and
//! setting the setuid or setgid bit (a root daemon's command could leave a setuid binary
//! in the workspace) — with the network on, Unix sockets unless `[sandbox]
//! allow_unix_sockets` names some (the user's other sockets are not the network) — and,
//! with the network off,
//! every socket but netlink (so no IP or Unix socket, loopback and amberd's own included;
//! `socketpair` stays, it reaches nothing). `clone3` and `openat2` answer `ENOSYS` so that
//! libc falls back to `clone` and `openat`, whose flags and mode the filter can see.
//!
//! On a kernel without Landlock's signal scope (ABI < 6) it also keeps amberd out of reach
//! of signals ([`SignalGuard`]): `kill` of amberd's pid, of its process group and of every
//! process (`-1`), `tgkill`/`rt_sigqueueinfo`/`rt_tgsigqueueinfo` to amberd, and `tkill`
//! and `pidfd_send_signal` altogether (their targets cannot be told apart here). What it
//! cannot refuse: `kill` of one of amberd's thread ids, and signals to other processes of
//! the same user outside the sandbox (docs/security.md).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::sandbox::SandboxError;

/// Always refused.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount_setattr,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_open_by_handle_at,
];

/// Refused on a host the command shares (no namespaces of its own): System V and POSIX IPC,
/// whose objects belong to every process of the user (a namespace would have kept them
/// apart).
const HOST_IPC: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semctl,
    libc::SYS_semtimedop,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
];

/// `clone` flags that create namespaces.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// System calls whose first argument is a pid, `0` meaning the caller: refused for any
/// other pid.
const OWN_PID_ONLY: &[libc::c_long] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
    libc::SYS_migrate_pages,
    libc::SYS_move_pages,
];

/// `setpriority`'s and `ioprio_set`'s "every process of a user" selector.
const PRIO_USER: u64 = 2;
const IOPRIO_WHO_USER: u64 = 3;

/// System calls that set a mode, with the index of their mode argument.
const MODE_SETTING: &[(libc::c_long, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// `(nr, flags arg, mode arg)` of the opens whose mode counts only with `O_CREAT` or
/// `O_TMPFILE`. `openat2` keeps its mode in a struct the filter cannot read: it answers
/// `ENOSYS`, so callers fall back to `openat`.
const OPENS: &[(libc::c_long, u8, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 1, 2),
    (libc::SYS_openat, 2, 3),
];

/// ioctl requests that push input into a terminal.
const TIOCLINUX: u64 = 0x541C;

/// Whom signals must not reach when Landlock cannot scope them: amberd, the helper's parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SignalGuard {
    /// Each guarded process and its process group.
    targets: Vec<(libc::pid_t, libc::pid_t)>,
}

impl SignalGuard {
    /// The calling helper's parent (amberd, which spawned it) and its process group.
    pub(super) fn of_parent() -> Self {
        // SAFETY: getppid has no preconditions.
        Self::of(unsafe { libc::getppid() })
    }

    /// `pid` (amberd) and its process group.
    pub(super) fn of(pid: libc::pid_t) -> Self {
        SignalGuard {
            targets: vec![(pid, pgid_of(pid))],
        }
    }

    /// This guard, also keeping signals from `pid` and its process group.
    pub(super) fn and(mut self, pid: libc::pid_t) -> Self {
        if pid > 0 && !self.targets.iter().any(|(p, _)| *p == pid) {
            self.targets.push((pid, pgid_of(pid)));
        }
        self
    }

    /// The rules refusing signals to the guarded processes, by system call.
    fn rules(self) -> Result<Vec<(libc::c_long, Vec<SeccompRule>)>, SandboxError> {
        let pid_is = |arg: u8, pid: libc::pid_t| -> Result<SeccompRule, SandboxError> {
            // pid_t is an int: compare the low 32 bits, as the kernel reads it.
            rule(vec![cond(
                arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                u64::from(pid as u32),
            )?])
        };
        let mut kill = vec![pid_is(0, -1)?];
        let mut to_process = Vec::new();
        for (pid, pgid) in &self.targets {
            kill.push(pid_is(0, *pid)?);
            if *pgid > 0 {
                kill.push(pid_is(0, -*pgid)?);
            }
            to_process.push(*pid);
        }
        let each = |pids: &[libc::pid_t]| -> Result<Vec<SeccompRule>, SandboxError> {
            pids.iter().map(|pid| pid_is(0, *pid)).collect()
        };
        Ok(vec![
            (libc::SYS_kill, kill),
            (libc::SYS_tgkill, each(&to_process)?),
            (libc::SYS_rt_sigqueueinfo, each(&to_process)?),
            (libc::SYS_rt_tgsigqueueinfo, each(&to_process)?),
            (libc::SYS_tkill, Vec::new()),
            (libc::SYS_pidfd_send_signal, Vec::new()),
        ])
    }
}

fn pgid_of(pid: libc::pid_t) -> libc::pid_t {
    // SAFETY: getpgid of a pid only reads.
    unsafe { libc::getpgid(pid) }
}

/// Installs the filter; `unix_sockets`: with the network on, Unix sockets may be created
/// (`[sandbox] allow_unix_sockets` names some); `signals`: also refuse signals to amberd
/// (no Landlock signal scope); `shared_host`: the command has no namespaces of its own (so
/// no Unix socket ever, no netlink without the network, no IPC).
pub(super) fn install(
    network: bool,
    egress: bool,
    unix_sockets: bool,
    signals: Option<SignalGuard>,
    shared_host: bool,
) -> Result<(), SandboxError> {
    let err = |e: &dyn std::fmt::Display| SandboxError::Seccomp(e.to_string());
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| err(&e))?;

    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = u64::from(flag.unsigned_abs());
            rule(vec![cond(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    let tiocsti = u64::from(libc::TIOCSTI as u32);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                tiocsti,
            )?])?,
            rule(vec![cond(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                TIOCLINUX,
            )?])?,
        ],
    );
    for nr in OWN_PID_ONLY {
        rules.insert(*nr, vec![rule(vec![not_self(0)?])?]);
    }
    // (which, who): refused when `who` is another process, group or user, or the user.
    for (nr, every_of_user) in [
        (libc::SYS_setpriority, PRIO_USER),
        (libc::SYS_ioprio_set, IOPRIO_WHO_USER),
    ] {
        rules.insert(
            nr,
            vec![
                rule(vec![not_self(1)?])?,
                rule(vec![cond(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    every_of_user,
                )?])?,
            ],
        );
    }
    let set_id_bits = |arg: u8| -> Result<Vec<SeccompRule>, SandboxError> {
        [libc::S_ISUID, libc::S_ISGID]
            .into_iter()
            .map(|bit| {
                let bit = u64::from(bit);
                rule(vec![cond(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(bit),
                    bit,
                )?])
            })
            .collect()
    };
    for (nr, mode_arg) in MODE_SETTING {
        rules.insert(*nr, set_id_bits(*mode_arg)?);
    }
    for (nr, flags_arg, mode_arg) in OPENS {
        let mut open_rules = Vec::new();
        for creating in [libc::O_CREAT, libc::O_TMPFILE] {
            let creating = u64::from(creating.unsigned_abs());
            for bit in [libc::S_ISUID, libc::S_ISGID] {
                let bit = u64::from(bit);
                open_rules.push(rule(vec![
                    cond(
                        *flags_arg,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::MaskedEq(creating),
                        creating,
                    )?,
                    cond(
                        *mode_arg,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::MaskedEq(bit),
                        bit,
                    )?,
                ])?);
            }
        }
        rules.insert(*nr, open_rules);
    }
    if shared_host {
        rules.extend(HOST_IPC.iter().map(|nr| (*nr, Vec::new())));
    }
    if !network && shared_host {
        // Without a network namespace netlink would read the host's own.
        rules.insert(libc::SYS_socket, Vec::new());
    } else if !network && egress {
        // The allowlist's namespace: IP sockets reach its loopback (the proxy) and nothing
        // else; still no Unix socket.
        let refused = [libc::AF_NETLINK, libc::AF_INET, libc::AF_INET6]
            .into_iter()
            .map(|family| {
                let family = u64::from(family.unsigned_abs());
                cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family)
            })
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(libc::SYS_socket, vec![rule(refused)?]);
    } else if !network {
        let netlink = u64::from(libc::AF_NETLINK.unsigned_abs());
        rules.insert(
            libc::SYS_socket,
            vec![rule(vec![cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                netlink,
            )?])?],
        );
    } else if !unix_sockets || shared_host {
        // Without a mount namespace the sockets a command must not reach (amberd's) cannot
        // be covered: no Unix socket at all.
        let unix = u64::from(libc::AF_UNIX.unsigned_abs());
        rules.insert(
            libc::SYS_socket,
            vec![rule(vec![cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                unix,
            )?])?],
        );
    }
    if let Some(guard) = signals {
        rules.extend(guard.rules()?);
    }
    let main = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )
    .map_err(|e| err(&e))?;
    let fall_back = SeccompFilter::new(
        BTreeMap::from([
            (libc::SYS_clone3, Vec::new()),
            (libc::SYS_openat2, Vec::new()),
        ]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS.unsigned_abs()),
        arch,
    )
    .map_err(|e| err(&e))?;
    for filter in [fall_back, main] {
        let program: BpfProgram = filter
            .try_into()
            .map_err(|e: seccompiler::BackendError| err(&e))?;
        seccompiler::apply_filter(&program).map_err(|e| err(&e))?;
    }
    Ok(())
}

/// Argument `arg` (a pid or an id) names someone other than the caller (`0`).
fn not_self(arg: u8) -> Result<SeccompCondition, SandboxError> {
    cond(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| SandboxError::Seccomp(e.to_string()))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(|e| SandboxError::Seccomp(e.to_string()))
}
