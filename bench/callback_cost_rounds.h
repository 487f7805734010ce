// callback_cost_rounds.h: the timed loops of kp_callback_cost, in a shared library of their own
// (bench/callback_cost_rounds.cc says why).
#pragma once

#include <cstdint>

#define KP_CALLBACK_COST_API __attribute__((visibility("default")))

struct KpSide;  // kp's recorder with its decoder and encoder

// ns per launch (4 callbacks) of the floor's callback, over `launches` launches.
KP_CALLBACK_COST_API double FloorRound(long launches);
KP_CALLBACK_COST_API KpSide* NewKpSide();
KP_CALLBACK_COST_API void DeleteKpSide(KpSide* kp_side);
KP_CALLBACK_COST_API uint64_t KpDropped(const KpSide* kp_side);
// ns per launch (4 callbacks) of kp's recorder; `correlation` carries on between rounds.
KP_CALLBACK_COST_API double KpRound(KpSide& kp_side, long launches, uint32_t* correlation);
KP_CALLBACK_COST_API double KpOffRound(KpSide& kp_side, long launches, uint32_t* correlation);
KP_CALLBACK_COST_API double EmptyRound(long launches);
