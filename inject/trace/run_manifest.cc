#include "inject/trace/run_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/run_files.h"

namespace kp {
namespace {

// JSON string: quotes, backslashes and every byte outside printable ASCII escaped as \u00XX,
// so the entry is valid JSON whatever bytes a command line holds.
void AppendJsonString(std::string* out, const std::string& s) {
  *out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
    } else {
      *out += static_cast<char>(c);
    }
  }
  *out += '"';
}

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string ManifestEntryJson(const ManifestEntry& e) {
  std::string o = "{\"run_id\":";
  AppendJsonString(&o, e.run_id);
  o += std::string(",\"root\":") + (e.root ? "true" : "false");
  o += ",\"file\":";
  AppendJsonString(&o, e.file);
  o += ",\"pid\":" + std::to_string(e.pid) + ",\"ppid\":" + std::to_string(e.ppid);
  o += ",\"host\":";
  AppendJsonString(&o, e.host);
  o += ",\"rank\":" + std::to_string(e.rank) + ",\"local_rank\":" + std::to_string(e.local_rank) +
       ",\"world_size\":" + std::to_string(e.world_size);
  o += ",\"command\":[";
  for (size_t i = 0; i < e.command.size(); ++i) {
    if (i > 0) o += ',';
    AppendJsonString(&o, e.command[i]);
  }
  o += "],\"start_unix_ns\":" + std::to_string(e.start_unix_ns);
  o += ",\"state\":";
  AppendJsonString(&o, e.state);
  o += ",\"end_reason\":";
  AppendJsonString(&o, e.end_reason);
  o += "}";
  return o;
}

Status WriteManifestEntry(const std::string& dir, const ManifestEntry& entry) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Error("cannot create the run manifest " + dir + ": " + std::strerror(errno));
  }
  const std::string name = ManifestEntryName(entry.host, entry.pid);
  const std::string final_path = dir + "/" + name;
  const std::string temp_path = dir + "/." + name + ".tmp";
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::Error("cannot write the run manifest entry " + temp_path + ": " +
                         std::strerror(errno));
  }
  const bool ok = WriteAll(fd, ManifestEntryJson(entry) + "\n");
  const int close_result = ::close(fd);
  if (!ok || close_result != 0 || ::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const Status failed = Status::Error("cannot write the run manifest entry " + final_path + ": " +
                                        std::strerror(errno));
    ::unlink(temp_path.c_str());
    return failed;
  }
  return Status();
}

}  // namespace kp
