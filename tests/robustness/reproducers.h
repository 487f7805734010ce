// reproducers.h: the damaged and hostile traces of the robustness review (each one once made
// kptrace exhaust memory, destroy an input, lose a chunk or miscount damage), built from the
// shipped example trace. They are regression tests (reader_test, cli_robustness.sh) and part
// of the fuzz seed corpus (fuzz/).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kp {

// name (a file name ending in .kptrace) -> file bytes. `example` is the bytes of a good
// multi-chunk trace (examples/pytorch_h200.kptrace).
std::vector<std::pair<std::string, std::string>> BuildReproducers(const std::string& example);

// The framed chunks of a trace file (each with its 24-byte header), after the file magic.
std::vector<std::string> SplitChunks(const std::string& file);

}  // namespace kp
