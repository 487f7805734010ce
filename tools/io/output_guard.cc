#include "tools/io/output_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kp {
namespace {

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string TempName(const std::string& path) {
  return path + ".kptrace-tmp." + std::to_string(getpid());
}

void RemoveTree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

}  // namespace

bool InputSet::Add(const std::string& path, std::string* note) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (ids_[i].first == st.st_dev && ids_[i].second == st.st_ino) {
        *note = path + " is the same file as " + id_paths_[i] + ": read once";
        return false;
      }
    }
    ids_.emplace_back(st.st_dev, st.st_ino);
    id_paths_.push_back(path);
  }
  paths_.push_back(path);
  return true;
}

void InputSet::AddAll(const std::vector<std::string>& paths, const char* command) {
  for (const std::string& path : paths) {
    std::string note;
    if (!Add(path, &note)) std::fprintf(stderr, "%s: warning: %s\n", command, note.c_str());
  }
}

Status InputSet::CheckOutput(const std::string& output) const {
  struct stat st;
  if (stat(output.c_str(), &st) != 0) return Status();  // a new file cannot be an input
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (ids_[i].first == st.st_dev && ids_[i].second == st.st_ino) {
      return Status::Error("the output " + output + " is the input file " + id_paths_[i] +
                           ": refusing to write over it (choose another output name)");
    }
  }
  return Status();
}

Status InputSet::CheckOutputDirectory(const std::string& dir, const std::string& suffix) const {
  struct stat dst;
  if (stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode)) return Status();
  for (const std::string& path : id_paths_) {
    struct stat st;
    if (path.size() < suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0 ||
        stat(DirName(path).c_str(), &st) != 0) {
      continue;
    }
    if (st.st_dev == dst.st_dev && st.st_ino == dst.st_ino) {
      return Status::Error("the output directory " + dir + " would receive " + suffix +
                           " files and holds the input " + path +
                           ": refusing to write over it (choose another output directory)");
    }
  }
  return Status();
}

AtomicOutputFile::AtomicOutputFile(std::string path) : path_(std::move(path)) {
  struct stat st;
  if (lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // Replace the file the link points to, never the link itself (/dev/stdout, say).
    if (char* real = realpath(path_.c_str(), nullptr)) {
      path_ = real;
      free(real);
    } else {
      direct_ = true;
    }
  }
  // A device, pipe or socket (/dev/null, a fifo) is written in place: it cannot be replaced.
  if (stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) direct_ = true;
  temp_ = direct_ ? path_ : TempName(path_);
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_ && !direct_) unlink(temp_.c_str());
}

Status AtomicOutputFile::Commit() {
  if (direct_) {
    committed_ = true;
    return Status();
  }
  if (rename(temp_.c_str(), path_.c_str()) != 0) {
    return Status::Error(path_ + ": cannot write: " + std::strerror(errno));
  }
  committed_ = true;
  return Status();
}

AtomicOutputDirectory::AtomicOutputDirectory(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  temp_ = TempName(dir_);
}

AtomicOutputDirectory::~AtomicOutputDirectory() {
  if (!committed_) RemoveTree(temp_);
}

Status AtomicOutputDirectory::Commit() {
  if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Error(dir_ + ": cannot create directory: " + std::strerror(errno));
  }
  DIR* d = opendir(temp_.c_str());
  if (d == nullptr) return Status::Error(temp_ + ": cannot read: " + std::strerror(errno));
  Status moved;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (rename((temp_ + "/" + name).c_str(), (dir_ + "/" + name).c_str()) != 0) {
      moved = Status::Error(dir_ + "/" + name + ": cannot write: " + std::strerror(errno));
      break;
    }
  }
  closedir(d);
  if (!moved.ok()) return moved;
  committed_ = true;
  rmdir(temp_.c_str());
  return Status();
}

Status FlushStandardStreams() {
  errno = 0;
  const bool out_ok = std::fflush(stdout) == 0 && std::ferror(stdout) == 0;
  int out_errno = errno;
  if (!out_ok && out_errno == 0) {
    // The failure happened in an earlier buffered write and its errno is gone; output is
    // already incomplete, so one probe byte is harmless and names the reason (ENOSPC, EIO...).
    if (write(STDOUT_FILENO, "\n", 1) < 0) out_errno = errno;
  }
  const bool err_ok = std::fflush(stderr) == 0 && std::ferror(stderr) == 0;
  if (!out_ok) {
    return Status::Error(std::string("cannot write to standard output: ") +
                         (out_errno != 0 ? std::strerror(out_errno) : "write error"));
  }
  if (!err_ok) return Status::Error("cannot write to standard error");
  return Status();
}

}  // namespace kp
