#include "inject/cupti/encoder_thread.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "inject/cupti/activity_decoder.h"
#include "inject/cupti/buffer_pool.h"
#include "inject/log/log.h"

namespace kp {

EncoderThread::EncoderThread(TraceEncoder* encoder, ActivityDecoder* decoder, BufferPool* pool,
                             Options options)
    : encoder_(encoder), decoder_(decoder), pool_(pool), options_(std::move(options)) {}

EncoderThread::~EncoderThread() { Stop("destroyed"); }

Status EncoderThread::Start() {
  // The thread starts with every signal blocked (it inherits the mask in force here), so the
  // application's asynchronous signals go to its own threads, and SIGXFSZ from a write past
  // `ulimit -f` stays pending instead of killing the process: write() then fails with EFBIG and
  // the writer's one-line error path runs.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  Status started;
  try {
    thread_ = std::thread([this] { Run(); });
    started_ = true;
  } catch (const std::system_error& e) {
    started = Status::Error(std::string("cannot start the encoder thread: ") + e.what());
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return started;
}

bool EncoderThread::CuptiCallsAllowed() const {
  return options_.flush_cupti && (options_.cupti_usable == nullptr || options_.cupti_usable());
}

void EncoderThread::PushCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                  size_t valid_size) {
  Item item;
  item.completed = Completed{context, stream_id, buffer, valid_size};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(item));
  }
  wake_.notify_one();
}

void EncoderThread::Post(std::function<void(TraceEncoder&)> task) {
  Item item;
  item.task = std::move(task);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(item));
  }
  wake_.notify_one();
}

void EncoderThread::Stop(const std::string& end_reason) {
  if (!started_ || stopped_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    end_reason_ = end_reason;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  stopped_ = true;
}

void EncoderThread::ReadDroppedCount(CUcontext context, uint32_t stream_id) {
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    encoder_->stats().cupti_dropped_records += dropped;
  }
}

void EncoderThread::DumpBuffer(const uint8_t* buffer, size_t size) {
  char path[4096];
  std::snprintf(path, sizeof(path), "%s/buf-%u-%llu.bin", options_.dump_dir.c_str(), options_.pid,
                static_cast<unsigned long long>(dump_count_++));
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    Log(LogSeverity::kError, "cannot write %s (KP_DUMP_BUFFERS); check the directory exists", path);
    options_.dump_dir.clear();  // say it once
    return;
  }
  size_t done = 0;
  int error = 0;
  while (done < size) {
    ssize_t n = ::write(fd, buffer + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (error != 0) {
    Log(LogSeverity::kError, "cannot write %s (KP_DUMP_BUFFERS): %s; buffer dumps stop here", path,
        std::strerror(error));
    ::unlink(path);
    options_.dump_dir.clear();  // say it once
  }
}

void EncoderThread::Process(Item& item) {
  if (item.task) {
    item.task(*encoder_);
    return;
  }
  Completed& c = item.completed;
  if (c.buffer == nullptr) return;
  ++encoder_->stats().buffers_completed;
  if (!options_.dump_dir.empty() && c.valid_size > 0) DumpBuffer(c.buffer, c.valid_size);
  records_decoded_ += decoder_->DecodeBuffer(c.buffer, c.valid_size);
  pool_->Release(c.buffer);
  if (CuptiCallsAllowed()) ReadDroppedCount(c.context, c.stream_id);
}

void EncoderThread::PoolStats() {
  encoder_->stats().buffers_refused = pool_->refused();
  encoder_->stats().buffers_allocated = pool_->allocated();
  encoder_->stats().buffers_trimmed = pool_->trimmed();
}

void EncoderThread::Run() {
  pthread_setname_np(pthread_self(), "kp-encoder");  // as top -H, perf and gdb show it
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::milliseconds(options_.flush_ms);
  auto next_flush = Clock::now() + period;
  const auto poll_period = std::chrono::milliseconds(options_.poll_ms);
  auto next_poll = Clock::now() + poll_period;
  std::deque<Item> batch;
  bool stopping = false;
  while (true) {
    bool period_due = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto wake_at = options_.poll ? std::min(next_flush, next_poll) : next_flush;
      wake_.wait_until(lock, wake_at, [&] { return stop_ || !queue_.empty(); });
      period_due = Clock::now() >= next_flush;
      stopping = stop_;
    }
    if (options_.poll) {
      records_decoded_ += options_.poll(*decoder_);
      next_poll = Clock::now() + poll_period;
    }
    if (period_due && !stopping && CuptiCallsAllowed()) {
      // Outside our lock: CUPTI calls bufferCompleted -> PushCompleted from inside FlushAll.
      cuptiActivityFlushAll(0);
      ReadDroppedCount(nullptr, 0);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      batch.swap(queue_);
      if (batch.size() > encoder_->stats().encoder_buffers_pending_max) {
        encoder_->stats().encoder_buffers_pending_max = batch.size();
      }
    }
    for (Item& item : batch) {
      Process(item);
      // A long batch (several full buffers) must not leave the API-call rings undrained.
      if (options_.poll && Clock::now() >= next_poll) {
        records_decoded_ += options_.poll(*decoder_);
        next_poll = Clock::now() + poll_period;
      }
      if (encoder_->FlushDue()) {
        decoder_->UpdateOpenRangeStat();
        PoolStats();
        encoder_->Flush();
      }
    }
    batch.clear();
    if (period_due) {
      next_flush = Clock::now() + period;
      pool_->TrimIdle();   // buffers free for a whole period give their pages back
      pool_->KeepSpare();  // once busy: a resident spare for the encoder's short stalls
      decoder_->UpdateOpenRangeStat();
      PoolStats();
      encoder_->Flush();
    }
    if (stopping) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty()) break;
    }
  }
  if (options_.poll) records_decoded_ += options_.poll(*decoder_);
  decoder_->Finish();
  PoolStats();
  FooterInfo footer;
  footer.end_time_ns = decoder_->last_timestamp();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    footer.end_reason = end_reason_;
  }
  encoder_->Finish(footer);
}

}  // namespace kp
