#include "common/capture_signal_name.h"

#include <signal.h>

#include <cstdint>
#include <string>

namespace kp {
namespace {

bool ParseSmall(std::string_view s, int max, int* out) {
  if (s.empty() || s.size() > 3) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

}  // namespace

int DefaultCaptureSignal() { return SIGRTMIN + 6; }

int ParseCaptureSignal(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s == "SIGUSR1") return SIGUSR1;
  if (s == "SIGUSR2") return SIGUSR2;
  int k = 0, signo = 0;
  if (s == "SIGRTMIN") {
    signo = SIGRTMIN;
  } else if (s == "SIGRTMAX") {
    signo = SIGRTMAX;
  } else if (s.substr(0, 9) == "SIGRTMIN+" && ParseSmall(s.substr(9), 64, &k)) {
    signo = SIGRTMIN + k;
  } else if (s.substr(0, 9) == "SIGRTMAX-" && ParseSmall(s.substr(9), 64, &k)) {
    signo = SIGRTMAX - k;
  } else if (ParseSmall(s, 64, &k) && k >= 1) {
    signo = k;
    if (signo == SIGUSR1 || signo == SIGUSR2) return signo;
  } else {
    return 0;
  }
  return signo >= SIGRTMIN && signo <= SIGRTMAX ? signo : 0;
}

}  // namespace kp
