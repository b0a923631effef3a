"""Lock the stimulus process down before it reads the stimulus (see __init__.py).

`lockdown()` applies, each as far as the kernel allows (the harness reports what was granted):
no_new_privs; resource limits (no file growth, 1 GiB of address space, no new descriptors, no
processes); Landlock with every filesystem right handled and none granted, no TCP bind/connect,
signals and abstract unix sockets scoped to this process; an empty capability set; a seccomp
filter (x86_64) refusing sockets, new processes, exec, signals, ptrace, chmod/chown/xattrs and
limits or priorities of other processes, which Landlock does not cover. main.py imports
everything it needs before, so the process never reads a file again.
"""
import ctypes
import os
import resource
import signal


def lockdown() -> dict:
    """Drop every right the stimulus could use against the run; returns what the kernel granted."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    got = {"no_new_privs": libc.prctl(38, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                                      ctypes.c_ulong(0)) == 0}
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
    for res, n in ((resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_AS, 1 << 30), (resource.RLIMIT_CORE, 0)):
        _cap(res, n)
    if os.getuid() != 0:  # root is exempt from RLIMIT_NPROC; seccomp covers it below
        _cap(resource.RLIMIT_NPROC, 0)
    got["landlock_abi"] = _landlock(libc)
    hdr, data = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()  # capset v3: no capabilities
    capset = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)
    got["capabilities_dropped"] = capset is not None and libc.syscall(ctypes.c_long(capset), hdr, data) == 0
    _cap(resource.RLIMIT_NOFILE, 1 + max(fd for fd in range(256) if _is_open(fd)))  # no new socket, pipe, file
    got["seccomp"] = os.uname().machine == "x86_64" and got["no_new_privs"] and _seccomp(libc)
    return got


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _cap(res: int, n: int) -> None:
    hard = resource.getrlimit(res)[1]
    n = n if hard == resource.RLIM_INFINITY else min(n, hard)
    resource.setrlimit(res, (n, n))


def _landlock(libc) -> int:
    """A Landlock domain that handles every right of this kernel's ABI and grants none."""
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0
    fs = (1 << 13) - 1 | (abi >= 2) << 13 | (abi >= 3) << 14 | (abi >= 5) << 15
    attr = (ctypes.c_uint64 * 3)(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)  # net: bind+connect TCP
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(ctypes.c_long(444), attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return 0
    ok = libc.syscall(ctypes.c_long(446), ctypes.c_long(fd), ctypes.c_uint32(0)) == 0
    os.close(fd)
    return abi if ok else 0


# x86_64 system calls the stimulus never needs. Landlock leaves chmod/chown/xattrs/timestamps
# alone, and same-uid calls can reach the simulator (prlimit, nice, affinity, signals).
_DENIED = (
    41, 42, 49, 53,  # socket connect bind socketpair
    56, 57, 58, 59, 322, 435,  # clone fork vfork execve execveat clone3
    62, 200, 234, 129, 297, 424, 434, 438,  # kill tkill tgkill rt_(tg)sigqueueinfo pidfd_send_signal/open/getfd
    101, 310, 311, 440,  # ptrace process_vm_readv/writev process_madvise
    90, 91, 268, 452, 92, 93, 94, 260,  # chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat
    132, 235, 261, 280,  # utime utimes futimesat utimensat
    188, 189, 190, 197, 198, 199, 463, 466, 469,  # set/remove xattr (+ *at), file_setattr
    141, 142, 144, 203, 251, 314, 160, 302,  # setpriority sched_set* ioprio_set setrlimit prlimit64
    165, 272, 308, 303, 304, 321, 323, 298, 425, 248, 249, 250,  # mount unshare setns handles bpf ... keys
)


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


def _seccomp(libc) -> bool:
    deny, n = 0x00050000 | 1, len(_DENIED)  # SECCOMP_RET_ERRNO | EPERM
    code = [(0x20, 0, 0, 4), (0x15, 1, 0, 0xC000003E), (0x06, 0, 0, deny),  # other arch (int 0x80): deny
            (0x20, 0, 0, 0), (0x35, n + 1, 0, 0x40000000)]  # x32 numbers: deny
    code += [(0x15, n - i, 0, nr) for i, nr in enumerate(_DENIED)]
    code += [(0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, deny)]
    filters = (_Filter * len(code))(*code)
    prog = _Prog(len(code), filters)
    return libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
