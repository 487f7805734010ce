// scratch_dir.h: where a test process puts its files. One directory per process, made on first
// use under gtest's TempDir() and removed with everything in it when the process ends, so the
// traces and converter outputs of a test run never outlive it (children the tests fork leave it
// alone).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kp::test {

// `name` inside this process's scratch directory.
inline std::string ScratchPath(const std::string& name) {
  struct Dir {
    std::string path;
    pid_t owner = getpid();
    Dir() {
      std::string base = ::testing::TempDir();
      if (base.empty() || base.back() != '/') base += '/';
      std::string pattern = base + "kp_test_XXXXXX";
      if (mkdtemp(pattern.data()) != nullptr) {
        path = pattern;
      } else {
        ADD_FAILURE() << "cannot make a scratch directory under " << base;
        path = base;  // the files still go somewhere; nothing is removed
        owner = 0;
      }
    }
    ~Dir() {
      if (owner != getpid()) return;
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Dir dir;
  return dir.path + "/" + name;
}

}  // namespace kp::test
