#include "tools/run/run_inputs.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/run_files.h"
#include "tools/reader/trace_reader.h"

namespace kp {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
  return path;
}

template <typename T>
T Field(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

bool RankOrder(const RunProcess& a, const RunProcess& b) {
  const bool ra = a.rank >= 0, rb = b.rank >= 0;
  if (ra != rb) return ra;  // ranked processes first
  if (a.rank != b.rank) return a.rank < b.rank;
  if (a.host != b.host) return a.host < b.host;
  return a.pid < b.pid;
}

std::string DescribeRun(const RunManifest& m) {
  int ranked = 0, unranked = 0, min_rank = INT_MAX, max_rank = -1;
  for (const RunProcess& p : m.processes) {
    if (!p.file_exists) continue;
    if (p.rank >= 0) {
      ++ranked;
      min_rank = std::min(min_rank, p.rank);
      max_rank = std::max(max_rank, p.rank);
    } else {
      ++unranked;
    }
  }
  std::ostringstream o;
  const int total = ranked + unranked;
  o << "run " << m.root << ": " << total << " process" << (total == 1 ? "" : "es");
  if (ranked > 0) {
    o << " (rank" << (min_rank == max_rank ? " " : "s ") << min_rank;
    if (max_rank != min_rank) o << "-" << max_rank;
    if (unranked > 0) o << ", " << unranked << " without rank";
    o << ")";
  }
  return o.str();
}

RunProcess ProcessFromHeader(const std::string& path) {
  RunProcess p;
  p.root = true;
  p.file = path;
  p.file_exists = true;
  auto reader = TraceReader::Open(path).value_or(nullptr);
  Chunk chunk;
  if (reader && reader->Next(&chunk) && reader->header() != nullptr) {
    const Header& h = *reader->header();
    p.run_id = h.run_id();
    p.pid = h.pid();
    p.ppid = h.ppid();
    p.host = h.hostname();
    p.rank = h.rank();
    p.local_rank = h.local_rank();
    p.world_size = h.world_size();
    p.command.assign(h.command_line().begin(), h.command_line().end());
    p.start_unix_ns = h.start_time_unix_ns();
  }
  return p;
}

}  // namespace

bool ReadRunManifest(const std::string& root_path, RunManifest* manifest) {
  const std::string dir = ManifestDirFor(root_path);
  if (!IsDirectory(dir)) return false;
  manifest->root = root_path;
  manifest->dir = dir;
  manifest->processes.clear();
  manifest->problems.clear();
  const std::string parent = DirName(root_path);
  for (const std::string& name : ListDirectory(dir)) {
    if (name[0] == '.' || !EndsWith(name, ".json")) continue;  // .tmp files being renamed
    std::ifstream in(dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception&) {
      manifest->problems.push_back(dir + "/" + name + ": not a manifest entry (unreadable JSON)");
      continue;
    }
    RunProcess p;
    p.run_id = Field<std::string>(j, "run_id", "");
    p.root = Field<bool>(j, "root", false);
    const std::string file = Field<std::string>(j, "file", "");
    if (file.empty() || file.find('/') != std::string::npos) {
      manifest->problems.push_back(dir + "/" + name + ": no usable file name");
      continue;
    }
    p.file = parent + file;
    p.pid = Field<uint32_t>(j, "pid", 0);
    p.ppid = Field<uint32_t>(j, "ppid", 0);
    p.host = Field<std::string>(j, "host", "");
    p.rank = Field<int>(j, "rank", -1);
    p.local_rank = Field<int>(j, "local_rank", -1);
    p.world_size = Field<int>(j, "world_size", -1);
    p.command = Field<std::vector<std::string>>(j, "command", {});
    p.start_unix_ns = Field<uint64_t>(j, "start_unix_ns", 0);
    p.state = Field<std::string>(j, "state", "");
    p.end_reason = Field<std::string>(j, "end_reason", "");
    p.file_exists = Exists(p.file);
    manifest->processes.push_back(std::move(p));
  }
  // The root lists itself only when it ended after others had joined: take what its header
  // says when its entry is missing (still running, killed, or alone).
  bool root_listed = false;
  for (const RunProcess& p : manifest->processes) root_listed |= p.file == root_path;
  if (!root_listed && Exists(root_path))
    manifest->processes.push_back(ProcessFromHeader(root_path));
  std::stable_sort(manifest->processes.begin(), manifest->processes.end(), RankOrder);
  return true;
}

bool FindRunOf(const std::string& trace_path, RunManifest* manifest) {
  const std::string base = BaseName(trace_path);
  const std::string parent = DirName(trace_path);
  // The usual case first: the file is a root with its manifest next to it.
  if (ReadRunManifest(trace_path, manifest)) return true;
  for (const std::string& name : ListDirectory(parent.empty() ? "." : parent)) {
    if (!EndsWith(name, ".procs")) continue;
    const std::string root = parent + name.substr(0, name.size() - 6);
    RunManifest candidate;
    if (!ReadRunManifest(root, &candidate)) continue;
    for (const RunProcess& p : candidate.processes) {
      if (BaseName(p.file) == base) {
        *manifest = std::move(candidate);
        return true;
      }
    }
  }
  return false;
}

TraceInputs ExpandTraceInputs(const std::vector<std::string>& args, bool single_files) {
  TraceInputs out;
  std::set<std::string> seen;
  auto add = [&](const std::string& file) {
    if (seen.insert(Canonical(file)).second) out.files.push_back(file);
  };
  auto add_run = [&](const RunManifest& m) {
    out.notes.push_back(DescribeRun(m));
    for (const std::string& p : m.problems) out.notes.push_back(p);
    for (const RunProcess& p : m.processes) {
      if (p.file_exists) {
        add(p.file);
      } else {
        out.notes.push_back(p.file + " (pid " + std::to_string(p.pid) +
                            (p.rank >= 0 ? ", rank " + std::to_string(p.rank) : std::string()) +
                            ") is listed in " + m.dir + " but missing");
      }
    }
  };
  for (const std::string& arg : args) {
    std::string path = arg;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    RunManifest manifest;
    if (IsDirectory(path)) {
      if (EndsWith(path, ".procs") && ReadRunManifest(path.substr(0, path.size() - 6), &manifest)) {
        add_run(manifest);
        continue;
      }
      size_t found = 0;
      for (const std::string& name : ListDirectory(path)) {
        if (EndsWith(name, ".kptrace") && !IsDirectory(path + "/" + name)) {
          add(path + "/" + name);
          ++found;
        }
      }
      if (found == 0) out.errors.push_back(arg + ": a directory with no .kptrace file in it");
      continue;
    }
    if (!Exists(path)) {
      // Keep it: the reader names the problem ("cannot open ...") in each command's words.
      add(path);
      continue;
    }
    if (!single_files && FindRunOf(path, &manifest) && manifest.processes.size() > 1) {
      add_run(manifest);
      add(path);  // listed already unless its entry is missing
      continue;
    }
    // A plain file named twice is passed on twice: the commands read it once and say so
    // (tools/io/output_guard.h, InputSet), which a silent drop here would hide.
    seen.insert(Canonical(path));
    out.files.push_back(path);
  }
  return out;
}

}  // namespace kp
