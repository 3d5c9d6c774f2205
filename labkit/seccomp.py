"""A seccomp filter for the learner's process (Linux, x86-64 and arm64): system calls that reach
memory no control group charges, or that undo the walls, fail with EPERM for it and for every
process it starts.

Refused: a user namespace (`unshare`, `clone` with CLONE_NEWUSER; `clone3`, whose flags a filter
cannot read, says ENOSYS, so libc falls back on `clone`), since inside one a process holds root's
powers again over a network of its own (packet rings, netlink) that no group charges; `setns`;
sockets of any family but Unix, IPv4 and IPv6 (what a database client uses; name lookups do without
netlink, listing network interfaces does not: a netlink queue, even a routing one, or a packet ring
held gigabytes that no group charged); io_uring, whose requests (a socket, say) no filter sees;
tracing and reading or writing another process's memory (`ptrace`, `process_vm_readv`/`writev`,
`pidfd_getfd`: a root learner that became another user traced that user's process into starting one
outside the wall); opening a file by its handle (`open_by_handle_at`: with a descriptor the checker
left open, a root learner opened the checker's view of the mounts, where /proc and the control
groups are writable); a lease on a file (`fcntl(F_SETLEASE)`: root owns the control groups' files
and the rest of /sys, and a lease on one held every other process that opened it, the supervisor
reading the group's memory among them, for up to the machine's lease break time); performance
events (`perf_event_open`: a gigabyte of kernel memory no group charges, in events copied into each
child and in their ring buffers); another process's resource limits (`prlimit64` with a pid but 0,
which names the caller: a process may lower for good the limits of any process of its user, with no
power needed: a root learner, init's); every socket option but those of `SOCKET_OPTIONS` and
`SOCKET_LEVELS` (what a client sets), since many keep memory no group charges (TCP MD5 keys: 726 MB
past a 64 MB wall; multicast memberships, whose release at exit also took the machine's network
lock for seconds); and any system call of another architecture's table (the 32-bit ones, x32),
which would pass the filter unread. Where the platform or the kernel has no seccomp, `install` does
nothing and says so with False.
"""

from __future__ import annotations

import ctypes
import platform
import struct
import sys
from typing import NamedTuple

# struct seccomp_data: nr (int), arch (u32), instruction pointer (u64), args (u64 x 6)
_NR, _ARCH = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i  # the low 32 bits of argument i on a little-endian machine


_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_EPERM, _ENOSYS = 0x00050000 | 1, 0x00050000 | 38
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
CLONE_NEWUSER = 0x10000000
F_SETLEASE = 1024
# the socket options the learner may set, by level; any at the socket's own level (1) and UDP's
# (17). Many others keep kernel memory per socket that no group charges, up to the machine's
# optmem_max (TCP's MD5 and AO keys, multicast memberships and source filters, IPv6's anycast,
# flow labels and sticky options), so the rest of these levels, and every other level, is refused.
SOCKET_OPTIONS = {
    0: (1, 2, 4, 6, 7, 8, 10, 11, 12, 13, 15, 21, 22, 24, 25, 26, 32, 33, 34, 50, 51),  # IPv4
    6: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 16, 17, 18, 23, 25, 30, 34, 36),  # TCP
    41: (16, 17, 18, 19, 23, 24, 25, 26, 31, 49, 50, 51, 52, 60, 62, 66, 67, 70, 72, 73, 76, 78),
}
SOCKET_LEVELS = (1, 17)  # SOL_SOCKET, UDP


class _Table(NamedTuple):
    """A machine's audit arch and its numbers of the system calls the filter reads."""

    arch: int
    socket: int
    socketpair: int
    unshare: int
    clone: int
    clone3: int
    fcntl: int
    prlimit64: int
    setsockopt: int
    # refused outright: setns, ptrace, process_vm_readv, process_vm_writev, pidfd_getfd,
    # io_uring_setup, io_uring_enter, io_uring_register, open_by_handle_at, perf_event_open
    refused: tuple[int, ...]


_TABLES = {
    "x86_64": _Table(
        *(0xC000003E, 41, 53, 272, 56, 435, 72, 302, 54),
        (308, 101, 310, 311, 438, 425, 426, 427, 304, 298),
    ),
    "aarch64": _Table(
        *(0xC00000B7, 198, 199, 97, 220, 435, 25, 261, 208),
        (268, 117, 270, 271, 438, 425, 426, 427, 265, 241),
    ),
}
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter for `machine` (`platform.machine()`) as BPF instructions (code, jump if
    true, jump if false, constant); None for a machine it has no table for."""
    if machine not in _TABLES:
        return None
    t = _TABLES[machine]
    # (code, label if true, label if false, constant); a label is resolved to a jump below
    code: list[tuple[int, str | None, str | None, int] | str] = [
        (_LD, None, None, _ARCH),
        (_JEQ, None, "deny", t.arch),
        (_LD, None, None, _NR),
    ]
    if machine == "x86_64":
        code.append((_JGE, "deny", None, 0x40000000))  # the x32 table
    code += [
        (_JEQ, "socket", None, t.socket),
        (_JEQ, "socket", None, t.socketpair),
        (_JEQ, "flags", None, t.unshare),
        (_JEQ, "flags", None, t.clone),
        (_JEQ, "nosys", None, t.clone3),
        (_JEQ, "fcntl", None, t.fcntl),
        (_JEQ, "own", None, t.prlimit64),
        (_JEQ, "option", None, t.setsockopt),
        *((_JEQ, "deny", None, number) for number in t.refused),
        (_RET, None, None, _ALLOW),
        "socket",
        (_LD, None, None, _arg(0)),
        (_JEQ, "allow", None, AF_UNIX),
        (_JEQ, "allow", None, AF_INET),
        (_JEQ, "allow", "deny", AF_INET6),
        "flags",
        (_LD, None, None, _arg(0)),
        (_JSET, "deny", "allow", CLONE_NEWUSER),
        "fcntl",
        (_LD, None, None, _arg(1)),
        (_JEQ, "deny", "allow", F_SETLEASE),
        "own",
        (_LD, None, None, _arg(0)),
        (_JEQ, "allow", "deny", 0),  # pid 0: the calling process
        "option",
        (_LD, None, None, _arg(1)),
        *((_JEQ, "allow", None, level) for level in SOCKET_LEVELS),
        *((_JEQ, f"level {level}", None, level) for level in SOCKET_OPTIONS),
        (_RET, None, None, _EPERM),
    ]
    for level, names in SOCKET_OPTIONS.items():
        code += [
            f"level {level}",
            (_LD, None, None, _arg(2)),
            *((_JEQ, "allow", None, name) for name in names),
            (_RET, None, None, _EPERM),
        ]
    code += [
        "allow",
        (_RET, None, None, _ALLOW),
        "deny",
        (_RET, None, None, _EPERM),
        "nosys",
        (_RET, None, None, _ENOSYS),
    ]
    where: dict[str, int] = {}
    for item in code:
        if isinstance(item, str):
            where[item] = sum(1 for c in code[: code.index(item)] if not isinstance(c, str))
    out: list[tuple[int, int, int, int]] = []
    for item in code:
        if isinstance(item, str):
            continue
        op, yes, no, k = item
        here = len(out) + 1  # jumps count from the next instruction
        out.append((op, where[yes] - here if yes else 0, where[no] - here if no else 0, k))
    return out


def install() -> bool:
    """Install the filter on this process (inherited by every process it starts; no way back:
    it also sets no-new-privileges, which an ordinary user needs to install one). False where
    there is none to install."""
    instructions = program(platform.machine()) if sys.platform.startswith("linux") else None
    if instructions is None:
        return False
    blob = b"".join(struct.pack("=HBBI", *i) for i in instructions)
    buffer = ctypes.create_string_buffer(blob, len(blob))

    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Program(len(instructions), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    word = ctypes.c_ulong
    libc.prctl.argtypes = [ctypes.c_int, word, ctypes.c_void_p, word, word]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:  # the unused arguments must be 0
        return False
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    return True
