// make_reproducers EXAMPLE.kptrace OUTDIR: writes the reproducers of reproducers.h into OUTDIR
// (for cli_robustness.sh and the fuzz seed corpus).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/robustness/reproducers.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_reproducers EXAMPLE.kptrace OUTDIR\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::string example((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    std::fprintf(stderr, "make_reproducers: cannot read %s\n", argv[1]);
    return 1;
  }
  for (const auto& [name, bytes] : kp::BuildReproducers(example)) {
    const std::string path = std::string(argv[2]) + "/" + name;
    std::ofstream o(path, std::ios::binary);
    o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!o.good()) {
      std::fprintf(stderr, "make_reproducers: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
