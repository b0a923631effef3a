// chorus_jail: run one untrusted build or simulation under OS isolation, without root.
//
//   chorus_jail [options] -- command args...
//     --ro PATH      may read and execute under PATH (file or directory)
//     --rw PATH      may read, write, create and delete under PATH
//     --tmpfs PATH   mount a fresh tmpfs of --quota-mb MiB on PATH (total disk quota)
//     --quota-mb N   size of every --tmpfs (default 256)
//     --chdir PATH   working directory of the command
//     --report FD    write one line `exit N` / `signal N` / `timeout` / `setup <why>` to FD when done;
//                    after `exit`/`signal`, one line `scratch BYTES` per mounted tmpfs: what its files
//                    held when the command's tree was gone (the run's write budget is judged on it)
//     --timeout S    kill the whole tree after S seconds (wall clock); the jail exits 124 only
//                    once every process of it is gone
//     --require      fail (exit 125, `setup ...` on the report) when a layer is unavailable
//     --strict       also refuse what Landlock leaves alone (chmod/chown, xattrs, timestamps,
//                    limits and priorities of other processes): for runs, which never need them
//     --probe        print the layers this kernel grants, one `name value` per line, and exit
//
// Layers, each applied when the kernel allows it (all of them under --require):
//   user namespace  no privilege outside; lets the rest run without root
//   net namespace   no network at all (only a loopback that is down)
//   pid namespace   the command is pid 2 under a small init (pid 1); when init exits, the kernel
//                   kills every process left in the namespace (setsid and double-forked daemons
//                   included) and only then does the jail exit, so callers read results from a
//                   dead tree. Without it a child subreaper kills the leftover descendants.
//   mount namespace private mounts for the tmpfs quota
//   Landlock        file access only where --ro/--rw say, no TCP, no signals or abstract unix
//                   sockets outside the sandbox (ABI 6)
//   seccomp         no ptrace, mounts, new namespaces, kernel keyrings, bpf, io_uring, sockets
//   no_new_privs, an empty capability bounding set, and PR_SET_PDEATHSIG: the jail (and with
//   it the whole tree) dies when the chorus process that started it dies, even by SIGKILL.
// Resource limits (memory, file size, CPU) stay with the caller's setrlimit, inherited here.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

struct ll_ruleset_attr { uint64_t handled_access_fs, handled_access_net, scoped; };
struct ll_path_beneath { uint64_t allowed_access; int32_t parent_fd; } __attribute__((packed));

// Filesystem rights by ABI: 1 has bits 0-12, 2 adds REFER (13), 3 TRUNCATE (14), 5 IOCTL_DEV (15).
#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_TRUNCATE (1ULL << 14)
#define FS_IOCTL_DEV (1ULL << 15)
#define NET_BIND_TCP (1ULL << 0)
#define NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)

#define MAX_PATHS 64

static const char *ro[MAX_PATHS], *rw[MAX_PATHS], *tmpfs[MAX_PATHS];
static int n_ro, n_rw, n_tmpfs, report_fd = -1, require_all, strict;
static long quota_mb = 256;
static double timeout_s = 0;
static volatile sig_atomic_t expired;

static void on_alarm(int sig) { (void)sig; expired = 1; }
static const char *workdir;

static void report(const char *what, long value) {
    if (report_fd >= 0) dprintf(report_fd, "%s %ld\n", what, value);
}

static void setup_fail(const char *what) {
    // A layer the caller required is missing: say which, and never run the command.
    char buf[256];
    snprintf(buf, sizeof buf, "%s: %s", what, strerror(errno));
    if (report_fd >= 0) dprintf(report_fd, "setup %s\n", buf);
    fprintf(stderr, "chorus_jail: %s\n", buf);
    _exit(125);
}

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int landlock_abi(void) {
    long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

static uint64_t fs_rights(int abi) {
    uint64_t all = (1ULL << 13) - 1;
    if (abi >= 2) all |= 1ULL << 13;
    if (abi >= 3) all |= FS_TRUNCATE;
    if (abi >= 5) all |= FS_IOCTL_DEV;
    return all;
}

static int add_path(int ruleset, const char *path, uint64_t access, uint64_t handled) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;  // a toolchain path this system lacks
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        access &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;
    struct ll_path_beneath pb = {access & handled, fd};
    long r = syscall(__NR_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
    close(fd);
    return r < 0 ? -1 : 0;
}

static int apply_landlock(int abi) {
    uint64_t handled = fs_rights(abi);
    struct ll_ruleset_attr attr = {handled, 0, 0};
    if (abi >= 4) attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
    if (abi >= 6) attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL;
    size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 16 : 8;
    int rs = (int)syscall(__NR_landlock_create_ruleset, &attr, size, 0);
    if (rs < 0) return -1;
    uint64_t read = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;
    for (int i = 0; i < n_ro; i++)
        if (add_path(rs, ro[i], read, handled)) return -1;
    for (int i = 0; i < n_rw; i++)
        if (add_path(rs, rw[i], handled, handled)) return -1;
    for (int i = 0; i < n_tmpfs; i++)
        if (add_path(rs, tmpfs[i], handled, handled)) return -1;
    if (add_path(rs, "/dev/null", FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE, handled)) return -1;
    if (add_path(rs, "/dev/zero", FS_READ_FILE, handled)) return -1;
    if (add_path(rs, "/dev/urandom", FS_READ_FILE, handled)) return -1;
    long r = syscall(__NR_landlock_restrict_self, rs, 0);
    close(rs);
    return r < 0 ? -1 : 0;
}

#if defined(__x86_64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_AARCH64
#endif

static int apply_seccomp(void) {
#ifdef AUDIT_ARCH_SELF
    static const int denied[] = {
        SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_mount, SYS_umount2, SYS_pivot_root,
        SYS_chroot, SYS_unshare, SYS_setns, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd, SYS_keyctl,
        SYS_add_key, SYS_request_key, SYS_kexec_load, SYS_init_module, SYS_finit_module, SYS_delete_module,
        SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register, SYS_open_by_handle_at,
        SYS_name_to_handle_at, SYS_quotactl, SYS_swapon, SYS_swapoff, SYS_reboot, SYS_syslog, SYS_acct,
        SYS_settimeofday, SYS_clock_settime, SYS_adjtimex, SYS_socket, SYS_fsopen, SYS_fsmount,
        SYS_move_mount, SYS_open_tree, SYS_fanotify_init,
#ifdef SYS_iopl
        SYS_iopl, SYS_ioperm,
#endif
    };
    // Landlock does not cover metadata: a run (which never needs it) may not change modes,
    // owners, extended attributes or timestamps of any file, nor the priority of any process.
    static const int denied_strict[] = {
        SYS_fchmod, SYS_fchmodat, 452 /* fchmodat2 */, SYS_fchown, SYS_fchownat, SYS_setxattr, SYS_lsetxattr,
        SYS_fsetxattr, SYS_removexattr, SYS_lremovexattr, SYS_fremovexattr, SYS_utimensat, SYS_setpriority,
        SYS_sched_setaffinity, SYS_sched_setscheduler, SYS_sched_setparam,
#ifdef SYS_chmod
        SYS_chmod, SYS_chown, SYS_lchown, SYS_utime, SYS_utimes, SYS_futimesat,
#endif
    };
    enum { N = sizeof denied / sizeof denied[0], NS = sizeof denied_strict / sizeof denied_strict[0] };
    struct sock_filter f[4 + 2 * (N + NS) + 6 + 1];
    int k = 0;
    // Another architecture's syscall numbers would slip past the list: kill instead.
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_SELF, 1, 0);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (int i = 0; i < N + (strict ? NS : 0); i++) {
        int nr = i < N ? denied[i] : denied_strict[i - N];
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    }
    if (strict) {
        // prlimit64 on ourselves (pid 0) is how the C library reads and sets its own limits;
        // on any other process it is refused.
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prlimit64, 0, 5);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]) + 4);
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    }
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {(unsigned short)k, f};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

static void drop_capabilities(void) {
    for (int cap = 0; cap <= 63; cap++) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

// Which layers were set up; printed by --probe.
static int have_userns, have_netns, have_pidns, have_mntns, have_landlock, have_seccomp;

static void enter_namespaces(void) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER) == 0) {
        have_userns = 1;
        char map[64];
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
        if (write_file("/proc/self/uid_map", map)) have_userns = 0;
        snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
        if (write_file("/proc/self/gid_map", map)) have_userns = 0;
    } else if (require_all) {
        setup_fail("user namespace");
    }
    have_netns = unshare(CLONE_NEWNET) == 0;
    if (!have_netns && require_all) setup_fail("network namespace");
    unshare(CLONE_NEWIPC | CLONE_NEWUTS);
    have_mntns = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
    if (!have_mntns && require_all) setup_fail("mount namespace");
    have_pidns = unshare(CLONE_NEWPID) == 0;
    if (!have_pidns && require_all) setup_fail("pid namespace");
}

static int mounted[MAX_PATHS];

static void mount_quotas(void) {
    char opts[64];
    snprintf(opts, sizeof opts, "size=%ldm,nr_inodes=65536,mode=0700", quota_mb);
    for (int i = 0; i < n_tmpfs; i++) {
        mounted[i] = have_mntns && mount("tmpfs", tmpfs[i], "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0;
        if (!mounted[i] && require_all) setup_fail("tmpfs disk quota");
    }
}

static void report_scratch(void) {
    // Only a tmpfs of our own is measured: without one the files are the caller's to count.
    for (int i = 0; i < n_tmpfs; i++) {
        struct statfs fs;
        if (mounted[i] && statfs(tmpfs[i], &fs) == 0)
            report("scratch", (long)((fs.f_blocks - fs.f_bfree) * (unsigned long)fs.f_bsize));
    }
}

static void kill_descendants(void) {
    // Fallback without a pid namespace: we are a child subreaper, so every orphaned descendant
    // (setsid or double-forked) is re-parented to us; kill and reap them until none is left.
    for (int round = 0; round < 1000; round++) {
        int found = 0;
        DIR *d = opendir("/proc");
        if (!d) break;
        struct dirent *e;
        char path[300], buf[512];
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n <= 0) continue;
            buf[n] = 0;
            char *rp = strrchr(buf, ')');
            int ppid = 0;
            if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == getpid()) {
                kill(atoi(e->d_name), SIGKILL);
                found = 1;
            }
        }
        closedir(d);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        if (!found) break;
        usleep(1000);
    }
}

static int run_command(char **argv) {
    // The command process: last layers, then exec. Everything here runs before untrusted code.
    if (workdir && chdir(workdir) != 0) setup_fail("chdir");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) setup_fail("no_new_privs");
    drop_capabilities();
    int abi = landlock_abi();
    if (abi < (require_all ? 6 : 1) || apply_landlock(abi) != 0) {
        if (require_all) setup_fail(abi < 6 ? "Landlock ABI 6" : "Landlock ruleset");
    }
    if (apply_seccomp() != 0 && require_all) setup_fail("seccomp filter");
    execvp(argv[0], argv);
    fprintf(stderr, "chorus_jail: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int wait_status(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}

static int probe(void) {
    require_all = 0;
    pid_t pid = fork();
    if (pid == 0) {
        enter_namespaces();
        pid_t inner = fork();
        if (inner == 0) {
            int abi = landlock_abi();
            have_landlock = abi;
            have_seccomp = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && apply_seccomp() == 0;
            if (abi > 0 && apply_landlock(abi) != 0) have_landlock = 0;
            printf("user_namespace %d\nnet_namespace %d\npid_namespace %d\nmount_namespace %d\n"
                   "landlock_abi %d\nseccomp %d\n", have_userns, have_netns, have_pidns && getpid() == 1,
                   have_mntns, have_landlock, have_seccomp);
            fflush(stdout);
            _exit(0);
        }
        int st = wait_status(inner);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    int st = wait_status(pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv) {
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) { i++; break; }
        if (!strcmp(a, "--probe")) return probe();
        if (!strcmp(a, "--require")) { require_all = 1; continue; }
        if (!strcmp(a, "--strict")) { strict = 1; continue; }
        if (!v) { fprintf(stderr, "chorus_jail: %s needs a value\n", a); return 125; }
        if (!strcmp(a, "--ro") && n_ro < MAX_PATHS) ro[n_ro++] = v;
        else if (!strcmp(a, "--rw") && n_rw < MAX_PATHS) rw[n_rw++] = v;
        else if (!strcmp(a, "--tmpfs") && n_tmpfs < MAX_PATHS) tmpfs[n_tmpfs++] = v;
        else if (!strcmp(a, "--quota-mb")) quota_mb = atol(v);
        else if (!strcmp(a, "--timeout")) timeout_s = atof(v);
        else if (!strcmp(a, "--chdir")) workdir = v;
        else if (!strcmp(a, "--report")) report_fd = atoi(v);
        else { fprintf(stderr, "chorus_jail: unknown option %s\n", a); return 125; }
        i++;
    }
    if (i >= argc) { fprintf(stderr, "chorus_jail: no command after --\n"); return 125; }
    if (report_fd >= 0) fcntl(report_fd, F_SETFD, FD_CLOEXEC);
    // Die with the process that started us; if it is already gone, do not start at all.
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);

    enter_namespaces();
    if (!have_pidns) prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t init = fork();
    if (init < 0) setup_fail("fork");
    if (init == 0) {
        // pid 1 of the new namespace (or a plain child without one): mounts, then the command.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        mount_quotas();
        pid_t cmd = fork();
        if (cmd < 0) setup_fail("fork");
        if (cmd == 0) return run_command(argv + i);
        int st = -1, w;
        for (;;) {  // as init, reap every orphan until the command itself ends
            w = waitpid(-1, &st, 0);
            if (w == cmd) break;
            if (w < 0 && errno != EINTR) break;
        }
        // Nothing of the tree may write after the scratch is measured: as pid 1, kill the rest now
        // (the kernel would when we exit) and reap them; without a pid namespace, the subreaper's way.
        if (have_pidns && getpid() == 1) {
            kill(-1, SIGKILL);
            while (wait(NULL) > 0 || errno == EINTR) {}
        } else {
            kill_descendants();
        }
        if (WIFSIGNALED(st)) report("signal", WTERMSIG(st));
        else report("exit", WEXITSTATUS(st));
        report_scratch();
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    // Returns only after the kernel has killed and reaped everything in the pid namespace, so
    // a caller that sees this process gone knows the command's whole tree is gone too.
    if (timeout_s > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;  // no SA_RESTART: waitpid returns EINTR when the time is up
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 0}, {(long)timeout_s, (long)((timeout_s - (long)timeout_s) * 1e6)}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    int st;
    for (;;) {
        if (waitpid(init, &st, 0) == init) break;
        if (errno != EINTR) return 125;
        if (expired) {
            kill(init, SIGKILL);  // init's death takes the whole namespace with it
            while (waitpid(init, &st, 0) < 0 && errno == EINTR) {}
            if (!have_pidns) kill_descendants();
            if (report_fd >= 0) dprintf(report_fd, "timeout\n");
            return 124;
        }
    }
    if (!have_pidns) kill_descendants();
    if (WIFSIGNALED(st)) { signal(WTERMSIG(st), SIG_DFL); kill(getpid(), WTERMSIG(st)); }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 125;
}
