// chorus simulation driver: runs a Verilated testbench and always writes coverage.
//
// Why a custom main: Verilator's --binary main aborts on $fatal/$stop before writing
// coverage, never stops a testbench that forgets $finish, and merges instances of one
// module unless forcePerInstance is set. The coverage and status files live outside the
// testbench's working directory; their paths arrive by environment so the design cannot
// name them.
//
// Batches: CHORUS_PROGRAMS=N runs N programs one after another in this process (a prebuilt
// harness reading stimulus as data: program i gets +chorus_program=i). Each program gets a new
// VerilatedContext and a new model, so its state, its random seed, its open files and its
// coverage counters start exactly as in a process of its own; the working directory is emptied
// between programs. The result stream is, per program, "begin <i>\n" when it starts and one frame
// when it ends, so the caller knows which program was in flight if the process dies.
#include "Vtb.h"
#include "verilated.h"
#include "verilated_cov.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

static volatile std::sig_atomic_t g_output_limit = 0;
static VerilatedContext* g_ctx = nullptr;
static int g_result_fd = -1;
static bool g_written = false;
static int g_program = 0;
static long long g_log_start = 0;
// Coverage is staged in the working directory (Verilator writes it by file name only). The
// directory's tmpfs has room for it beyond the run's write budget (execute.scratch_policy), and a
// run whose files went past that budget is charged whatever its coverage, so nothing is reserved.
static const char* kStage = ".chorus_coverage.dat";

static void on_xfsz(int) { g_output_limit = 1; }

static bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

// Where the shared log (stdout and stderr, one open file) stands now: each program's output is
// the byte range between two such offsets, so the caller can tell one program's output from the next.
static long long log_offset() {
    std::fflush(stdout);
    std::fflush(stderr);
    const off_t at = ::lseek(STDOUT_FILENO, 0, SEEK_CUR);
    return at < 0 ? -1 : (long long)at;
}

// What the files under a directory hold (allocated blocks, as du counts them): the program's share
// of the run's write budget, measured before its directory is emptied for the next program.
static long long dir_bytes(int dirfd) {
    DIR* d = ::fdopendir(dirfd);
    if (!d) {
        ::close(dirfd);
        return 0;
    }
    long long total = 0;
    while (struct dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        total += (long long)st.st_blocks * 512;
        if (S_ISDIR(st.st_mode)) {
            const int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) total += dir_bytes(sub);
        }
    }
    ::closedir(d);  // closes dirfd
    return total;
}

static void write_results(const char* reason) {
    if (g_written || !g_ctx || g_result_fd < 0) return;
    g_written = true;
    std::signal(SIGXFSZ, SIG_IGN);
    const long long log_end = log_offset();
    // Unlink, not truncate: whatever the testbench put at that name is replaced by the regular file
    // Verilator creates, and only a regular file is read back.
    ::unlink(kStage);
    g_ctx->coveragep()->forcePerInstance(true);
    g_ctx->coveragep()->write(kStage);
    std::string cov;
    if (int fd = ::open(kStage, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); fd >= 0) {
        struct stat st;
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            char buf[1 << 16];
            ssize_t n;
            while ((n = ::read(fd, buf, sizeof buf)) > 0) cov.append(buf, (size_t)n);
        }
        ::close(fd);
    }
    ::unlink(kStage);
    const int here = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const long long scratch = here >= 0 ? dir_bytes(here) : -1;
    char status[360];
    std::snprintf(status, sizeof status,
                  "{\"end\": \"%s\", \"time\": %llu, \"precision\": %d, \"errors\": %d, \"program\": %d, "
                  "\"log\": [%lld, %lld], \"scratch\": %lld}",
                  reason, (unsigned long long)g_ctx->time(), (int)g_ctx->timeprecision(),
                  (int)g_ctx->errorCount(), g_program, g_log_start, log_end, scratch);
    std::string frame = std::string("chorus-result 1\nstatus ") + status + "\ncoverage "
                        + std::to_string(cov.size()) + "\n" + cov + "end\n";
    write_all(g_result_fd, frame.data(), frame.size());
}

static void on_exit_cb(void*) { write_results("fatal"); }

// Everything a program left in the working directory goes before the next one starts, so no
// program can read what another wrote. False if anything could not be removed.
static bool empty_dir(int dirfd) {
    DIR* d = ::fdopendir(dirfd);
    if (!d) {
        ::close(dirfd);
        return false;
    }
    bool ok = true;
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    for (const std::string& name : names) {
        if (::unlinkat(dirfd, name.c_str(), 0) == 0) continue;
        ::fchmodat(dirfd, name.c_str(), 0700, AT_SYMLINK_NOFOLLOW);
        int sub = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 || !empty_dir(sub) || ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) ok = false;
    }
    ::closedir(d);  // closes dirfd
    return ok;
}

static bool fresh_scratch() {
    const int fd = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || !empty_dir(fd)) return false;
    g_output_limit = 0;
    std::signal(SIGXFSZ, on_xfsz);
    return true;
}

static bool run_program(int program, const std::vector<const char*>& args, double max_ns) {
    const std::string arg = "+chorus_program=" + std::to_string(program);
    std::vector<const char*> argv(args);
    argv.push_back(arg.c_str());
    const std::unique_ptr<VerilatedContext> contextp{new VerilatedContext};
    g_ctx = contextp.get();
    g_written = false;
    g_program = program;
    contextp->commandArgs((int)argv.size(), argv.data());
    contextp->fatalOnError(false);
    const std::unique_ptr<Vtb> top{new Vtb{contextp.get(), "TOP"}};

    const double ticks_per_ns = std::pow(10.0, -9 - (int)contextp->timeprecision());
    const double max_ticks = max_ns * ticks_per_ns;
    const char* reason = "finish";
    while (!contextp->gotFinish()) {
        top->eval();
        if (g_output_limit) { reason = "output_limit"; break; }
        if (contextp->gotFinish()) break;
        if (!top->eventsPending()) { reason = "idle"; break; }
        const uint64_t next = top->nextTimeSlot();
        if ((double)next > max_ticks) { reason = "max_time"; break; }
        contextp->time(next);
    }
    if (contextp->gotFinish() && contextp->gotError()) reason = "stop";
    top->final();
    write_results(reason);
    g_ctx = nullptr;
    return !g_output_limit;
}

int main(int argc, char** argv) {
    const char* fd_s = std::getenv("CHORUS_RESULT_FD");
    const char* max_ns_s = std::getenv("CHORUS_MAX_TIME_NS");
    const char* programs_s = std::getenv("CHORUS_PROGRAMS");
    if (!fd_s) {
        std::fprintf(stderr, "chorus_main: CHORUS_RESULT_FD must be set\n");
        return 2;
    }
    g_result_fd = std::atoi(fd_s);
    if (::fcntl(g_result_fd, F_SETFD, FD_CLOEXEC) != 0) {
        std::fprintf(stderr, "chorus_main: CHORUS_RESULT_FD is not an open descriptor\n");
        return 2;
    }
    const double max_ns = max_ns_s ? std::atof(max_ns_s) : 1e7;
    const int programs = programs_s ? std::atoi(programs_s) : 1;
    unsetenv("CHORUS_RESULT_FD");
    std::vector<const char*> args(argv, argv + argc);
    Verilated::addExitCb(on_exit_cb, nullptr);
    for (int i = 0; i < programs; ++i) {
        if (!fresh_scratch()) {
            std::fprintf(stderr, "chorus_main: could not empty the working directory before program %d\n", i);
            return 3;  // the caller runs the programs not begun in a new process
        }
        g_log_start = log_offset();
        const std::string begin = "begin " + std::to_string(i) + "\n";
        write_all(g_result_fd, begin.data(), begin.size());
        // The log is shared: past the output limit every later program would be cut short too.
        if (!run_program(i, args, max_ns)) break;
    }
    Verilated::removeExitCb(on_exit_cb, nullptr);
    ::close(g_result_fd);
    return 0;
}
