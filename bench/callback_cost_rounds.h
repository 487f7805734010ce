// callback_cost_rounds.h: the timed loops of kp_callback_cost, in a shared library of their own
// (bench/callback_cost_rounds.cc says why).
#pragma once

#include <cstddef>
#include <cstdint>

#define KP_CALLBACK_COST_API __attribute__((visibility("default")))

struct KpSide;  // kp's recorder with its decoder and encoder

// ns per launch of the floor's callback, over `launches` launches: 4 callbacks, or with
// `driver_only` the driver call's 2 (kp's default KP_API=launch and the floor's driver_only).
KP_CALLBACK_COST_API double FloorRound(long launches, bool driver_only);
// kp's recorder as KP_API=launch-runtime takes calls, or with `driver_only` as KP_API=launch.
KP_CALLBACK_COST_API KpSide* NewKpSide(bool driver_only);
KP_CALLBACK_COST_API void DeleteKpSide(KpSide* kp_side);
KP_CALLBACK_COST_API uint64_t KpDropped(const KpSide* kp_side);
// ns per launch of kp's recorder (its side's callbacks); `correlation` carries on between rounds.
KP_CALLBACK_COST_API double KpRound(KpSide& kp_side, long launches, uint32_t* correlation);
KP_CALLBACK_COST_API double KpOffRound(KpSide& kp_side, long launches, uint32_t* correlation);
KP_CALLBACK_COST_API double EmptyRound(long launches, bool driver_only);
// Launches at a program's pace: `spin_ns` of busy work before each, then no callback, the
// floor's, or kp's with its rings drained every 10 ms by a thread of their own (kp's encoder
// thread's cadence; on another core where there is one). ns per launch of the whole loop.
enum class PacedCallbacks { kNone, kFloor, kKp };
KP_CALLBACK_COST_API double PacedRound(KpSide* kp_side, long launches, long spin_ns,
                                       PacedCallbacks callbacks, uint32_t* correlation);
// The same with `evict_bytes` of other memory written before each launch (the callbacks' data
// pushed out of the core's caches, as a program's work between launches does); only the
// launch's callbacks are timed. ns per launch.
KP_CALLBACK_COST_API double ColdRound(KpSide* kp_side, long launches, size_t evict_bytes,
                                      PacedCallbacks callbacks, uint32_t* correlation);
