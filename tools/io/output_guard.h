// output_guard.h: kptrace never writes over a file it reads, and never leaves a partial or empty
// output behind. Every command that writes a file (convert -o, summary --append-log, report,
// diff) goes through these.
//
//   InputSet inputs;                       // 1. collect the inputs (a file given twice is
//   inputs.AddAll(files, "kptrace x");     //    read once, with a warning)
//   if (Status s = inputs.CheckOutput(out); !s.ok()) { print; return 2; }  // 2. refuse an input
//   AtomicOutputFile o(out);               // 3. write o.temp_path(), then o.Commit();
//                                          //    without Commit the temporary is removed
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kp {

// The input files of one command, identified by device and inode, so another name for the same
// file (a link, "./x", a symlink) is recognised.
class InputSet {
 public:
  // Adds `path`. False if it names a file already added: *note then says so ("B is the same
  // file as A: read once") and the caller skips it. A path that cannot be examined (missing) is
  // accepted: reading it reports the problem.
  bool Add(const std::string& path, std::string* note);
  // Adds every path, printing "<command>: warning: <note>" on stderr for each one skipped.
  void AddAll(const std::vector<std::string>& paths, const char* command);
  // An error naming the output and the input if `output` is one of the inputs.
  Status CheckOutput(const std::string& output) const;
  // For an output directory that receives files ending in `suffix`: an error if one of the
  // inputs is such a file inside it.
  Status CheckOutputDirectory(const std::string& dir, const std::string& suffix) const;
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::vector<std::pair<dev_t, ino_t>> ids_;
  std::vector<std::string> id_paths_;
  std::vector<std::string> paths_;
};

// A file written under a temporary name in the same directory and renamed over `path` by
// Commit(), so readers of `path` never see it half-written and a failed command leaves nothing.
// Destroyed without a successful Commit(), the temporary is removed. An output that is not a
// regular file (/dev/null, a fifo) is written directly; a symbolic link's target is replaced.
class AtomicOutputFile {
 public:
  explicit AtomicOutputFile(std::string path);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }
  Status Commit();

 private:
  std::string path_, temp_;
  bool direct_ = false;
  bool committed_ = false;
};

// The same for a directory of output files (CSV tables): written into a temporary directory
// beside `dir`; Commit() creates `dir` if needed and moves each file into it (replacing files of
// the same name, leaving others alone). Without Commit the temporary directory is removed.
class AtomicOutputDirectory {
 public:
  explicit AtomicOutputDirectory(std::string dir);
  ~AtomicOutputDirectory();
  AtomicOutputDirectory(const AtomicOutputDirectory&) = delete;
  AtomicOutputDirectory& operator=(const AtomicOutputDirectory&) = delete;
  const std::string& temp_path() const { return temp_; }
  Status Commit();

 private:
  std::string dir_, temp_;
  bool committed_ = false;
};

// Flushes stdout and stderr. An error saying why if anything written to either was lost (a full
// disk, a closed pipe, `> /dev/full`).
Status FlushStandardStreams();

}  // namespace kp
