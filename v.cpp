#include "verilated.h"
