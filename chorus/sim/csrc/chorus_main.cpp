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

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

static volatile std::sig_atomic_t g_output_limit = 0;
static VerilatedContext* g_ctx = nullptr;
static std::string g_cov_path;
static std::string g_status_path;
static bool g_written = false;

static void on_xfsz(int) { g_output_limit = 1; }

static void write_results(const char* reason) {
    if (g_written || !g_ctx) return;
    g_written = true;
    g_ctx->coveragep()->forcePerInstance(true);
    g_ctx->coveragep()->write(g_cov_path.c_str());
    if (FILE* f = std::fopen(g_status_path.c_str(), "w")) {
        std::fprintf(f, "{\"end\": \"%s\", \"time\": %llu, \"precision\": %d, \"errors\": %d}\n",
                     reason, (unsigned long long)g_ctx->time(), (int)g_ctx->timeprecision(),
                     (int)g_ctx->errorCount());
        std::fclose(f);
    }
}

static void on_exit_cb(void*) { write_results("fatal"); }

int main(int argc, char** argv) {
    const char* cov = std::getenv("CHORUS_COV_OUT");
    const char* status = std::getenv("CHORUS_STATUS_OUT");
    const char* max_ns_s = std::getenv("CHORUS_MAX_TIME_NS");
    if (!cov || !status) {
        std::fprintf(stderr, "chorus_main: CHORUS_COV_OUT and CHORUS_STATUS_OUT must be set\n");
        return 2;
    }
    g_cov_path = cov;
    g_status_path = status;
    const double max_ns = max_ns_s ? std::atof(max_ns_s) : 1e7;
    unsetenv("CHORUS_COV_OUT");
    unsetenv("CHORUS_STATUS_OUT");
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
