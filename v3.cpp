#include "verilated.h"
#include "verilated_cov.h"
#include "verilated_timing.h"
