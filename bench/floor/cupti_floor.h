// cupti_floor.h: the floor library's CUPTI callback (bench/floor/cupti_floor.cc), exposed so
// that the hot-path microbenchmark (bench/callback_cost.cc) can call it directly.
#pragma once

#include <cupti.h>

namespace kpfloor {

// What the floor does on each RUNTIME/DRIVER API callback: count it, read CUPTI's timestamp,
// keep the entry time per thread (and, with lazy_copy, enable the copy kinds at the first copy).
void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* cbdata);

}  // namespace kpfloor
