#include "inject/trace/write_error_advice.h"

#include <errno.h>

namespace kp {

const char* WriteErrorFix(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return "free disk space or set KP_OUTPUT to a path on another file system";
    case EFBIG:
      return "raise the file size limit (ulimit -f) or shorten the capture with KP_DURATION";
    case EACCES:
    case EPERM:
    case EROFS:
    case ENOENT:  // a directory in KP_OUTPUT that does not exist
      return "set KP_OUTPUT to a writable path";
    default:
      return "check the file system or set KP_OUTPUT to a writable path";
  }
}

}  // namespace kp
