// status.h: errors as values. A Status is OK or carries one message that names the problem and
// the fix; StatusOr<T> is a T or such a Status. Callers that add what they were doing use
// WithContext ("KP_OUTPUT: " + message) instead of pasting one message into another.
// Header-only and free of dependencies, so the injector and the tools can both use it; an OK
// Status allocates nothing.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kp {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !error_; }
  // Empty when ok().
  const std::string& message() const { return message_; }
  // "context: message" (OK stays OK).
  Status WithContext(std::string_view context) const {
    if (ok()) return *this;
    return Error(std::string(context) + ": " + message_);
  }

 private:
  explicit Status(std::string message) : error_(true), message_(std::move(message)) {}
  bool error_ = false;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit, like absl::StatusOr
  // `status` must not be OK (an OK status without a value is a programming error; it reads as
  // an error saying so rather than crashing the host).
  StatusOr(Status status)  // NOLINT
      : v_(status.ok() ? Status::Error("internal error: OK status without a value")
                       : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  // Only when ok().
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  // The value, or `fallback` when there is none (for callers that only need to know whether).
  template <typename U>
  T value_or(U&& fallback) && {
    return ok() ? std::move(std::get<T>(v_)) : static_cast<T>(std::forward<U>(fallback));
  }
  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? std::get<T>(v_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kp
