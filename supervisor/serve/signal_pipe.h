// The serve process's signals (SIGTERM, SIGINT, SIGHUP) as bytes in a pipe
// that the main thread polls, and the wake-up other threads use to hand it
// work (repository loads). One per process, made by ServeProcess::run() before
// start() and destroyed after shutdown(): its destructor restores SIG_DFL.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

namespace corepool {

// SIGTERM/SIGINT/SIGHUP land in a pipe that the main thread polls. Not
// sigwait: that needs the signals blocked in every thread, and libraries
// start threads before main() (OpenBLAS's pool), which would then take the
// signal with its default action and kill the process.
class SignalPipe {
 public:
  SignalPipe() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2() failed for the signal pipe");
    write_fd_ = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = &SignalPipe::on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  }
  ~SignalPipe() {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_DFL);
    write_fd_ = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  // Wakes wait() from any thread (0 for a signal): work was queued for the main thread.
  static void wake() { on_signal(0); }
  // The next signal received, or 0 when `timeout` passes first or wake() was called.
  int wait(std::chrono::milliseconds timeout) {
    pollfd p{fds_[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return 0;
    unsigned char sig = 0;
    return ::read(fds_[0], &sig, 1) == 1 ? sig : 0;
  }

 private:
  static void on_signal(int sig) {  // async-signal-safe: one write, errno kept
    const int saved = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    if (write_fd_ >= 0 && ::write(write_fd_, &byte, 1) < 0) {
      // a full pipe already holds a wake-up: nothing is lost
    }
    errno = saved;
  }
  static inline volatile sig_atomic_t write_fd_ = -1;
  int fds_[2] = {-1, -1};
};

}  // namespace corepool
