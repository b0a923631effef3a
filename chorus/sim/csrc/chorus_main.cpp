// chorus simulation driver: runs a Verilated testbench and always writes coverage.
//
// Why a custom main: Verilator's --binary main aborts on $fatal/$stop before writing
// coverage, never stops a testbench that forgets $finish, and merges instances of one
// module unless forcePerInstance is set. The coverage and status files live outside the
// testbench's working directory; their paths arrive by environment so the design cannot
// name them.
#include "Vtb.h"
#include "verilated.h"
#include "verilated_cov.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

static volatile std::sig_atomic_t g_output_limit = 0;
static VerilatedContext* g_ctx = nullptr;
static int g_result_fd = -1;
static bool g_written = false;
// Coverage is staged in the working directory (Verilator writes it by file name only). Space
// for it is reserved before any testbench code runs, so a testbench that fills its disk quota
// still leaves room for its coverage.
static const char* kStage = ".chorus_coverage.dat";
static const off_t kReserve = 4 << 20;

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

static void write_results(const char* reason) {
    if (g_written || !g_ctx) return;
    g_written = true;
    std::signal(SIGXFSZ, SIG_IGN);
    // Unlink, not truncate: whatever stands at that name now (the reserve, or something else the
    // testbench put there) is replaced by the regular file Verilator creates, and only a regular
    // file is read back.
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
    char status[256];
    std::snprintf(status, sizeof status,
                  "{\"end\": \"%s\", \"time\": %llu, \"precision\": %d, \"errors\": %d}",
                  reason, (unsigned long long)g_ctx->time(), (int)g_ctx->timeprecision(),
                  (int)g_ctx->errorCount());
    std::string frame = std::string("chorus-result 1\nstatus ") + status + "\ncoverage "
                        + std::to_string(cov.size()) + "\n" + cov + "end\n";
    write_all(g_result_fd, frame.data(), frame.size());
    ::close(g_result_fd);
    g_result_fd = -1;
}

static void on_exit_cb(void*) { write_results("fatal"); }

int main(int argc, char** argv) {
    const char* fd_s = std::getenv("CHORUS_RESULT_FD");
    const char* max_ns_s = std::getenv("CHORUS_MAX_TIME_NS");
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
    unsetenv("CHORUS_RESULT_FD");
    std::signal(SIGXFSZ, SIG_IGN);  // a reserve above the file-size limit just fails
    if (int fd = ::open(kStage, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600); fd >= 0) {
        ::posix_fallocate(fd, 0, kReserve);
        ::close(fd);
    }
    std::signal(SIGXFSZ, on_xfsz);

    const std::unique_ptr<VerilatedContext> contextp{new VerilatedContext};
    g_ctx = contextp.get();
    contextp->commandArgs(argc, argv);
    contextp->fatalOnError(false);
    Verilated::addExitCb(on_exit_cb, nullptr);
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
    Verilated::removeExitCb(on_exit_cb, nullptr);
    return 0;
}
